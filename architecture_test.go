package offsetd_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// architectureDoc is the design written down; its package table is what
// TestArchitecture holds the code to.
const architectureDoc = "docs/ARCHITECTURE.md"

// anchoredLayers fixes the layer of the packages that make the shape of
// offsetd: storage and models below the coordinator, the coordinator below
// its front ends, the command on top. The table of architectureDoc must
// agree; a package not named here takes its layer from the table.
var anchoredLayers = map[string]int{
	"log":                  0,
	"cache":                0,
	"partitioner":          0,
	"statictopic":          0,
	"internal/signal":      0,
	"internal/wire":        0,
	"internal/powercut":    0,
	"internal/offsetcheck": 0,
	"internal/buildinfo":   0,
	"coordinator":          1,
	"cluster":              2,
	"kafka":                2,
	"server":               2,
	"client":               2,
	"cmd/offsetd":          3,
}

// testSupport are packages for tests only: no production code imports them.
var testSupport = []string{"internal/powercut", "internal/offsetcheck", "internal/conntest", "internal/dirhash", "cluster/clustertest"}

// pure packages do no I/O (and statictopic and partitioner read no clock):
// the standard-library packages each must not import.
var pure = map[string][]string{
	"partitioner": {"os", "io/fs", "net", "net/http", "syscall", "path/filepath", "os/exec", "time", "math/rand", "math/rand/v2"},
	"statictopic": {"os", "io/fs", "net", "net/http", "syscall", "path/filepath", "os/exec", "time", "math/rand", "math/rand/v2"},
	"cache":       {"os", "io/fs", "net", "net/http", "syscall", "path/filepath", "os/exec"},
}

// pkg is one package of the repository as its files say.
type pkg struct {
	key        string   // its directory relative to the repository root; "." for the root
	importPath string   // its import path
	imports    []string // the keys of the repository's packages its non-test files import
	std        []string // every import path of its non-test files
}

// docRow is one row of the package table of architectureDoc.
type docRow struct {
	layer   int
	imports []string
	line    int
}

// TestArchitecture keeps the house clean: docs/ARCHITECTURE.md has one row
// for every package of the repository (both modules) and none for a
// package that is gone; each row's imports are the package's real imports
// inside the repository; no package imports one of a higher layer; test
// support stays out of production code; and the pure packages do no I/O.
// Go already refuses import cycles.
func TestArchitecture(t *testing.T) {
	pkgs, err := repositoryPackages(".")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := readPackageTable(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < len(anchoredLayers) {
		t.Fatalf("found %d packages, fewer than the %d anchored ones: is the test running at the repository root?", len(pkgs), len(anchoredLayers))
	}
	byKey := map[string]pkg{}
	for _, p := range pkgs {
		byKey[p.key] = p
	}

	for _, p := range pkgs {
		row, ok := rows[p.key]
		if !ok {
			t.Errorf("%s has no row for package %s (%s): add \"| `%s` | layer | imports | what it owns |\"",
				architectureDoc, p.key, p.importPath, p.key)
			continue
		}
		if want, ok := anchoredLayers[p.key]; ok && row.layer != want {
			t.Errorf("%s:%d puts %s in layer %d; it belongs in layer %d", architectureDoc, row.line, p.key, row.layer, want)
		}
		if !slices.Equal(row.imports, p.imports) {
			t.Errorf("%s:%d says %s imports %s; its files import %s",
				architectureDoc, row.line, p.key, list(row.imports), list(p.imports))
		}
	}
	for key, row := range rows {
		if _, ok := byKey[key]; !ok {
			t.Errorf("%s:%d has a row for %s, which is not a package of the repository", architectureDoc, row.line, key)
		}
	}
	for key := range anchoredLayers {
		if _, ok := byKey[key]; !ok {
			t.Errorf("anchored package %s is gone: update anchoredLayers and %s", key, architectureDoc)
		}
	}

	for _, p := range pkgs {
		from, ok := rows[p.key]
		if !ok {
			continue
		}
		for _, imp := range p.imports {
			to, ok := rows[imp]
			if ok && to.layer > from.layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import never points to a higher layer",
					p.key, from.layer, imp, to.layer)
			}
			if slices.Contains(testSupport, imp) {
				t.Errorf("%s imports %s, which is for tests only", p.key, imp)
			}
		}
		for _, imp := range pure[p.key] {
			if slices.Contains(p.std, imp) {
				t.Errorf("%s imports %s: it does no I/O and reads no clock of its own", p.key, imp)
			}
		}
	}
}

// repositoryPackages lists every package under root, in every module
// under root (a directory with a go.mod starts one), by what its files
// import for this platform.
func repositoryPackages(root string) ([]pkg, error) {
	type module struct{ dir, path string }
	var modules []module // outermost first
	var found []*build.Package
	var keys []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		if mp, err := modulePath(filepath.Join(path, "go.mod")); err == nil {
			modules = append(modules, module{path, mp})
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		bp, err := build.Default.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var m module
		for _, mm := range modules {
			if rel, err := filepath.Rel(mm.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
				m = mm // the innermost that holds path, since modules are outermost first
			}
		}
		if m.path == "" {
			return fmt.Errorf("%s: in no module", path)
		}
		rel, _ := filepath.Rel(m.dir, path)
		bp.ImportPath = m.path
		if rel != "." {
			bp.ImportPath += "/" + filepath.ToSlash(rel)
		}
		key, _ := filepath.Rel(root, path)
		found = append(found, bp)
		keys = append(keys, filepath.ToSlash(key))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("no go.mod under %s", root)
	}
	keyOf := map[string]string{}
	for i, bp := range found {
		keyOf[bp.ImportPath] = keys[i]
	}
	var out []pkg
	for i, bp := range found {
		p := pkg{key: keys[i], importPath: bp.ImportPath, std: bp.Imports}
		for _, imp := range bp.Imports {
			if k, ok := keyOf[imp]; ok {
				p.imports = append(p.imports, k)
			} else if imp == modules[0].path || strings.HasPrefix(imp, modules[0].path+"/") {
				return nil, fmt.Errorf("%s imports %s, which is no package of the repository", bp.ImportPath, imp)
			}
		}
		slices.Sort(p.imports)
		out = append(out, p)
	}
	return out, nil
}

// modulePath reads the module path of a go.mod file.
func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// tableRow matches a row of the package table: | `key` | layer | imports | ... |
var tableRow = regexp.MustCompile("^\\| `([^`]+)` \\| (\\d+) \\| ([^|]*) \\|")

// readPackageTable reads the package table of the architecture document:
// by package, its layer and the packages it imports ("—" for none).
func readPackageTable(path string) (map[string]docRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows := map[string]docRow{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := tableRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if prev, dup := rows[m[1]]; dup {
			return nil, fmt.Errorf("%s:%d: a second row for %s (the first is line %d)", path, n, m[1], prev.line)
		}
		layer, _ := strconv.Atoi(m[2])
		row := docRow{layer: layer, line: n}
		cell := strings.TrimSpace(m[3])
		if cell != "—" {
			for _, part := range strings.Split(cell, ",") {
				name, ok := strings.CutPrefix(strings.TrimSpace(part), "`")
				name, ok2 := strings.CutSuffix(name, "`")
				if !ok || !ok2 || name == "" {
					return nil, fmt.Errorf("%s:%d: imports cell %q: want `pkg`, `pkg` or —", path, n, cell)
				}
				row.imports = append(row.imports, name)
			}
		}
		slices.Sort(row.imports)
		rows[m[1]] = row
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no package table found", path)
	}
	return rows, nil
}

// list formats package keys for a message.
func list(keys []string) string {
	if len(keys) == 0 {
		return "nothing"
	}
	return strings.Join(keys, ", ")
}
