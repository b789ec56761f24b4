package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's Install section is what a new user copies first: the module path it
// gets must be this module's, every command it installs must be a main package of
// the repository, and the Go version it names must be go.mod's.
func TestReadmeInstallSection(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(gomod)
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if module == nil || goLine == nil {
		t.Fatalf("go.mod has no module or go line")
	}
	text := string(readme)
	start := strings.Index(text, "## Install\n")
	if start < 0 {
		t.Fatal("README.md has no Install section")
	}
	section := text[start+len("## Install\n"):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}

	t.Run("it names go.mod's Go version", func(t *testing.T) {
		if want := "Go " + string(goLine[1]); !strings.Contains(section, want) {
			t.Errorf("the Install section does not say %q", want)
		}
	})
	t.Run("go get fetches this module", func(t *testing.T) {
		if want := "go get " + string(module[1]) + "@latest"; !strings.Contains(section, want) {
			t.Errorf("the Install section does not say %q", want)
		}
	})
	t.Run("every go install names a main package of the repository", func(t *testing.T) {
		installs := regexp.MustCompile(`go install (\S+)@latest`).FindAllStringSubmatch(section, -1)
		if len(installs) < 2 {
			t.Fatalf("want the agentsim and taskrt-mcp commands installed, found %d go install lines", len(installs))
		}
		for _, m := range installs {
			rel, ok := strings.CutPrefix(m[1], string(module[1])+"/")
			if !ok {
				t.Errorf("go install %s: not a package of %s", m[1], module[1])
				continue
			}
			dir := filepath.Join(root, filepath.FromSlash(rel))
			files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
			isMain := false
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				src, err := os.ReadFile(f)
				if err == nil && regexp.MustCompile(`(?m)^package main$`).Match(src) {
					isMain = true
					break
				}
			}
			if !isMain {
				t.Errorf("go install %s: %s holds no main package", m[1], dir)
			}
		}
	})
}
