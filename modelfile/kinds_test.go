package modelfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
)

const wholeKinds = `models:
  - name: report
    kind: full
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    sql: SELECT 1 AS n
    macros: sqlmesh
  - name: recent
    kind: view
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    sql: SELECT * FROM report
    depends_on: [report]
  - name: regions
    kind: seed
    cron: "@daily"
    start: 2026-12-01T00:00:00Z
    seed_file: seeds/regions.csv
`

// writeModels writes body as models.yaml in a fresh folder with the seed
// CSV content given (nil: none), and returns the model file's path.
func writeModels(t *testing.T, body string, csv []byte) string {
	t.Helper()
	dir := t.TempDir()
	if csv != nil {
		if err := os.MkdirAll(filepath.Join(dir, "seeds"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "seeds", "regions.csv"), csv, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The whole kinds, the sqlmesh macros and a seed's CSV file relative to
// the model file: its content is the seed, and part of the derived
// version.
func TestParseWholeKinds(t *testing.T) {
	const csv = "id,name\n1,north\n"
	ms, err := Load(writeModels(t, wholeKinds, []byte(csv)))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Model{}
	for _, m := range ms {
		by[m.Register.Model] = m
	}
	if r := by["report"].Register; r.SnapshotKind != events.Full || r.Macros != models.MacrosSQLMesh {
		t.Fatalf("report %+v", r)
	}
	if r := by["recent"].Register; r.SnapshotKind != events.View {
		t.Fatalf("recent %+v", r)
	}
	seed := by["regions"].Register
	if seed.SnapshotKind != events.Seed || seed.Seed != csv {
		t.Fatalf("regions %+v", seed)
	}
	other, err := Load(writeModels(t, wholeKinds, []byte(csv+"2,south\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range other {
		if m.Register.Model == "regions" && m.Register.Version == seed.Version {
			t.Fatal("a changed CSV kept its derived version")
		}
	}
}

func TestParseWholeKindErrors(t *testing.T) {
	csv := []byte("id\n1\n")
	cases := []struct {
		name, body string
		csv        []byte
		want       string
	}{
		{"seed file missing", wholeKinds, nil, `models[2].seed_file: "seeds/regions.csv"`},
		{"seed file escapes", strings.Replace(wholeKinds, "seeds/regions.csv", "../regions.csv", 1), csv, `models[2].seed_file: "../regions.csv": want a path relative to the model file`},
		{"seed file absolute", strings.Replace(wholeKinds, "seeds/regions.csv", "/etc/passwd", 1), csv, `models[2].seed_file: "/etc/passwd": want a path relative`},
		{"seed without file", strings.Replace(wholeKinds, "    seed_file: seeds/regions.csv\n", "", 1), csv, "models[2].seed_file: is required for a seed"},
		{"seed file on a full model", strings.Replace(wholeKinds, "    macros: sqlmesh\n", "    seed_file: seeds/regions.csv\n", 1), csv, "models[0].seed_file: is only for kind seed"},
		{"seed too large", wholeKinds, []byte(strings.Repeat("x", models.MaxSeed+1)), "is more than"},
		{"full with lookback", strings.Replace(wholeKinds, "    macros: sqlmesh\n", "    lookback: 1\n", 1), csv, "models[0].lookback: lookback 1 is not allowed"},
		{"view without sql", strings.Replace(wholeKinds, "    sql: SELECT * FROM report\n", "", 1), csv, "models[1].sql: is required for a view"},
		{"unknown macros", strings.Replace(wholeKinds, "macros: sqlmesh", "macros: jinja", 1), csv, "models[0].macros:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeModels(t, c.body, c.csv))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ...%s...", err, c.want)
			}
		})
	}
}

// A symbolic link out of the model file's folder is refused.
func TestSeedFileSymlinkOut(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.csv")
	if err := os.WriteFile(outside, []byte("a\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := writeModels(t, wholeKinds, nil)
	if err := os.MkdirAll(filepath.Join(filepath.Dir(path), "seeds"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(filepath.Dir(path), "seeds", "regions.csv")); err != nil {
		t.Skip(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "models[2].seed_file") {
		t.Fatalf("a link out of the folder: %v", err)
	}
}
