package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README is the front door and docs/ the reference it sends readers to: a link
// that leads nowhere or a `make` command the Makefile does not have is the first
// thing a newcomer trips on, so both are checked in every Markdown file they hold.
func TestDocsLinksAndCommands(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(makefile), -1) {
		targets = append(targets, m[1])
	}

	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	command := regexp.MustCompile("(?:`|^|\n)make ([a-z][a-z0-9-]*)")
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		t.Run(name+": every relative link names an existing file", func(t *testing.T) {
			found := 0
			for _, m := range link.FindAllStringSubmatch(string(src), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				found++
				if _, err := os.Stat(filepath.Join(filepath.Dir(file), filepath.FromSlash(target))); err != nil {
					t.Errorf("link %q: %v", m[1], err)
				}
			}
			if name == "README.md" && found < 5 {
				t.Errorf("the README links %d files; want at least its docs/ reference", found)
			}
		})
		t.Run(name+": every make command names a Makefile target", func(t *testing.T) {
			for _, m := range command.FindAllStringSubmatch(string(src), -1) {
				if !slices.Contains(targets, m[1]) {
					t.Errorf("make %s: no such target in the Makefile (targets: %s)", m[1], strings.Join(targets, " "))
				}
			}
		})
	}

	t.Run("the README names the two commands", func(t *testing.T) {
		readme, err := os.ReadFile(filepath.Join(root, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"make run", "make test"} {
			if !strings.Contains(string(readme), want) {
				t.Errorf("the README does not say %q", want)
			}
		}
	})
}
