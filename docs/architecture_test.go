package docs_test

import (
	"bufio"
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tidemark/tidemark/"

// testOnly are the packages the graph leaves out: they may import anything.
var testOnly = map[string]bool{"integration": true, "invariants": true, "docs": true}

var graphLine = regexp.MustCompile(`^\s*(\d+) (\S+)\s+─▶(.*)$`)

// TestArchitectureGraph: docs/architecture.md's import graph lists every
// package of the module with exactly the module's packages it imports
// (non-test files), and every import points to a lower floor.
func TestArchitectureGraph(t *testing.T) {
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	floors := map[string]int{}
	documented := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := graphLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		floor, _ := strconv.Atoi(m[1])
		deps := m[3]
		if i := strings.Index(deps, "(+"); i >= 0 {
			deps = deps[:i]
		}
		floors[m[2]] = floor
		documented[m[2]] = strings.Fields(deps)
	}
	if len(floors) == 0 {
		t.Fatal("no graph in architecture.md")
	}
	actual := map[string][]string{}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files (or only tests)
		}
		name := filepath.ToSlash(rel)
		if testOnly[strings.Split(name, "/")[0]] {
			return nil
		}
		var deps []string
		for _, imp := range pkg.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				deps = append(deps, dep)
			}
		}
		actual[name] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, deps := range actual {
		doc, ok := documented[name]
		if !ok {
			t.Errorf("package %s is missing from the graph (it imports %v)", name, deps)
			continue
		}
		slices.Sort(doc)
		slices.Sort(deps)
		if !slices.Equal(doc, deps) {
			t.Errorf("%s: the graph says it imports %v, the code %v", name, doc, deps)
		}
		for _, dep := range deps {
			if df, ok := floors[dep]; ok && df >= floors[name] {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must point down", name, floors[name], dep, df)
			}
		}
	}
	for name := range documented {
		if _, ok := actual[name]; !ok {
			t.Errorf("the graph lists %s, which is no package", name)
		}
	}
}
