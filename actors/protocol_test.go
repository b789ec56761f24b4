package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The seal is checked by the compiler only where a message goes through a sealed
// send (tellRegistry, tellAgent, tellTask, requestTask, tellListener, tellSetWaiter,
// call): a raw Send or Request of an internal message would compile whatever its
// target. So no internal message (a type with an is…Msg seal method) may be handed
// to Send, Request or send directly.
func TestInternalMessagesGoThroughSealedSends(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	sealed := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, file)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !strings.HasPrefix(fn.Name.Name, "is") || !strings.HasSuffix(fn.Name.Name, "Msg") {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok {
					sealed[id.Name] = true
				}
			}
		}
	}
	if len(sealed) < 20 {
		t.Fatalf("found %d sealed message types; the scan is broken", len(sealed))
	}
	raw := map[string]bool{"Send": true, "Request": true, "send": true, "RequestWithCustomSender": true}
	for _, file := range parsed {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !raw[sel.Sel.Name] {
				return true
			}
			for _, arg := range call.Args {
				u, ok := arg.(*ast.UnaryExpr)
				if !ok || u.Op != token.AND {
					continue
				}
				if lit, ok := u.X.(*ast.CompositeLit); ok {
					if id, ok := lit.Type.(*ast.Ident); ok && sealed[id.Name] {
						t.Errorf("%s: %s sent with %s; use the sealed send for its actor", fset.Position(call.Pos()), id.Name, sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}
