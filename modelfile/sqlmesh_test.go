package modelfile

import (
	"reflect"
	"strings"
	"testing"
)

// TestReadSQLMeshConfig: top-level keys in order with their lines, the
// model_defaults entries with their scalars as written; bad shapes are
// errors with file and line.
func TestReadSQLMeshConfig(t *testing.T) {
	src := "# a project\ngateways:\n  local:\n    connection:\n      type: duckdb\nmodel_defaults:\n  dialect: duckdb\n  start: 2024-01-01\n  cron: '@daily'\n  audits: [a]\nproject: shop\n"
	top, defaults, err := ReadSQLMeshConfig("config.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wantTop := []ConfigEntry{{Key: "gateways", Line: 2}, {Key: "model_defaults", Line: 6}, {Key: "project", Value: "shop", Scalar: true, Line: 11}}
	if !reflect.DeepEqual(top, wantTop) {
		t.Errorf("top %+v, want %+v", top, wantTop)
	}
	wantDefaults := []ConfigEntry{{Key: "dialect", Value: "duckdb", Scalar: true, Line: 7}, {Key: "start", Value: "2024-01-01", Scalar: true, Line: 8},
		{Key: "cron", Value: "@daily", Scalar: true, Line: 9}, {Key: "audits", Line: 10}}
	if !reflect.DeepEqual(defaults, wantDefaults) {
		t.Errorf("defaults %+v, want %+v", defaults, wantDefaults)
	}
	for _, tt := range []struct{ src, want string }{
		{"- a\n- b\n", "config.yaml:1: want a mapping"},
		{"model_defaults: 3\n", "config.yaml:1: model_defaults: want a mapping"},
		{"a: 1\nmodel_defaults:\n  start: x\n  start: y\n", `config.yaml:4: mapping key "start" already defined`},
		{"a: [1\n", "config.yaml:"},
	} {
		_, _, err := ReadSQLMeshConfig("config.yaml", []byte(tt.src))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %s…", tt.src, err, tt.want)
		}
	}
	if top, d, err := ReadSQLMeshConfig("config.yaml", []byte("# nothing\n")); err != nil || top != nil || d != nil {
		t.Errorf("empty: %v %v %v", top, d, err)
	}
}
