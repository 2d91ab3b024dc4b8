package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/modelfile"
)

// FuzzParse: the loader accepts a file or returns a *modelfile.Error, never a
// panic.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../testdata/scenarios/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(base))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := Parse("fuzz.yaml", b); err != nil && !errors.Is(err, modelfile.ErrInvalid) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
	})
}
