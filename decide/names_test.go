package decide

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
)

// Two table ids never share a warehouse table: a version whose table name
// (models.TableName) equals another registered table id's is refused on
// its version, and so is a plan whose derived version would (the digest
// is 48 bits: a client who picks version names could search for a
// collision; the test forces one).
func TestTableNameCollisionRefused(t *testing.T) {
	collide := func(id string) string {
		if strings.HasPrefix(id, "events@") {
			return "events__000000000000"
		}
		return models.TableName(id)
	}
	tableName = collide
	t.Cleanup(func() { tableName = models.TableName })

	w := newWorld(t)
	w.hourly("events", "v1")
	ce := w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v2", Cron: "@hourly", Start: t0}, t0, commands.CodeInvalid)
	if ce.Field != "version" || !strings.Contains(ce.Message, "events@v1") {
		t.Fatalf("refusal: %v (field %s)", ce, ce.Field)
	}
	// The same version again is a duplicate, not a collision with itself.
	w.hourly("events", "v1")
	w.hourly("other", "v1")
	w.hourly("other", "v2")

	// A derived version (a downstream of a plan's model) is checked too.
	w = newWorld(t)
	w.hourly("events", "v1")
	w.hourly("rollup", "v1", "events")
	tableName = func(id string) string {
		if strings.HasPrefix(id, "events@") {
			return "events__000000000000"
		}
		if strings.HasPrefix(id, "rollup@") {
			return "rollup__000000000000"
		}
		return models.TableName(id)
	}
	w.refused(&commands.RegisterSnapshot{Model: "rollup", Version: "v2", Cron: "@hourly", DependsOn: []string{"events"}, Start: t0}, t0, commands.CodeInvalid)
	tableName = models.TableName
	w.deploy("prod", "deploy", map[string]string{"events": "v1", "rollup": "v1"}, h(6))
	w.hourly("events", "v2")
	tableName = func(id string) string {
		if strings.HasPrefix(id, "rollup@") {
			return "rollup__000000000000"
		}
		return models.TableName(id)
	}
	ce = w.refused(&commands.BuildPlan{Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v2"}}, h(7), commands.CodeInvalid)
	if ce.Field != "plan" {
		t.Fatalf("derived collision: %v (field %s)", ce, ce.Field)
	}
}

// An environment's name is its schema: one that differs from another only
// by case (DuckDB folds it: "PROD" would replace prod's views) or is longer
// than 63 bytes is refused on env.
func TestEnvNameIsAWarehouseIdentifier(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"})
	w.hourly("events", "v2")
	for _, env := range []string{"PROD", "Prod", strings.Repeat("e", 64), "tidemark", "tidemark_meta", "tidemark_sandbox", "main", "public", "pg_catalog", "information_schema", "temp", "system", "pg_temp_1"} {
		ce := w.refused(&commands.BuildPlan{Plan: "p2", Env: env, Versions: map[string]string{"events": "v2"}}, h(7), commands.CodeInvalid)
		if ce.Field != "env" {
			t.Errorf("env %q: %v (field %s)", env, ce, ce.Field)
		}
	}
	w.must(&commands.BuildPlan{Plan: "p2", Env: strings.Repeat("e", 63), Versions: map[string]string{"events": "v2"}}, h(7))
}

// A schema-qualified model's view lives in schema <schema>__<env>: no two
// (environment, model) pairs may get one view. A new environment's name
// has no "__" and does not start with '_'; an environment named so
// before (kept working) takes no schema-qualified model; and a
// schema-qualified model's view schema may not be an existing
// environment's. Derived versions of qualified models plan as any other.
func TestQualifiedViewsNeverMeet(t *testing.T) {
	w := newWorld(t)
	w.hourly("sushi.events", "v1")
	w.hourly("sushi.rollup", "v1", "sushi.events")
	w.hourly("events", "v1")
	w.deploy("prod", "deploy", map[string]string{"sushi.events": "v1", "sushi.rollup": "v1"}, h(6))
	w.hourly("sushi.events", "v2")
	p := w.plan("p2", "prod", map[string]string{"sushi.events": "v2"}, h(7))
	if len(p.Candidates) != 2 || candidateOf(t, p, "sushi.rollup").Snapshot != "sushi.rollup@v1+p2" {
		t.Fatalf("the plan of sushi.events@v2: %+v", p.Candidates)
	}

	for _, env := range []string{"sushi__prod", "_prod", "a__b"} {
		ce := w.refused(&commands.BuildPlan{Plan: "n-" + strings.Trim(env, "_"), Env: env, Versions: map[string]string{"events": "v1"}}, h(7), commands.CodeInvalid)
		if ce.Field != "env" || !strings.Contains(ce.Message, `may not contain "__" nor start with '_'`) {
			t.Errorf("new env %q: %v (field %s)", env, ce, ce.Field)
		}
	}
	// Environments named so before schema-qualified models existed.
	w.st.Envs["sushi__dev"] = &projections.Env{Name: "sushi__dev", Incumbents: map[string]string{}}
	w.st.Envs["old__env"] = &projections.Env{Name: "old__env", Incumbents: map[string]string{}}
	w.must(&commands.BuildPlan{Plan: "legacy", Env: "old__env", Versions: map[string]string{"events": "v1"}}, h(7))
	ce := w.refused(&commands.BuildPlan{Plan: "legacy-q", Env: "old__env", Versions: map[string]string{"sushi.events": "v1"}}, h(7), commands.CodeInvalid)
	if ce.Field != "versions.sushi.events" || !strings.Contains(ce.Message, "takes no schema-qualified model") {
		t.Errorf("a qualified model into old__env: %v (field %s)", ce, ce.Field)
	}
	ce = w.refused(&commands.BuildPlan{Plan: "dev-q", Env: "dev", Versions: map[string]string{"sushi.events": "v1"}}, h(7), commands.CodeConflict)
	if ce.Field != "versions.sushi.events" || !strings.Contains(ce.Message, `sushi__dev.events, in the schema of environment "sushi__dev"`) {
		t.Errorf("sushi.events into dev while env sushi__dev exists: %v (field %s)", ce, ce.Field)
	}
	w.must(&commands.BuildPlan{Plan: "stage-q", Env: "stage", Versions: map[string]string{"sushi.events": "v1"}}, h(7))
}
