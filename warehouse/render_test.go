package warehouse

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRender(t *testing.T) {
	m := Model{
		Name: "daily", Table: "daily__1",
		SQL:        "SELECT hour AS day, '@not_a_macro' AS s, \"@col\" -- @comment\nFROM hourly WHERE hour >= @start_ts AND hour < @END_TS",
		TimeColumn: "day",
		Upstream:   map[string]string{"hourly": "hourly__9", "a_first": "a__1"},
	}
	got, err := render(m, "S", "E")
	if err != nil {
		t.Fatal(err)
	}
	want := "WITH \"a_first\" AS (SELECT * FROM \"tidemark\".\"a__1\"), \"hourly\" AS (SELECT * FROM \"tidemark\".\"hourly__9\")\n" +
		"SELECT * FROM (SELECT hour AS day, '@not_a_macro' AS s, \"@col\" -- @comment\nFROM hourly WHERE hour >= S AND hour < E\n) q"
	if got != want {
		t.Fatalf("render:\n%s\nwant:\n%s", got, want)
	}

	for _, c := range []struct{ sql, err string }{
		{"SELECT @other", "the macro @other"},
		{"SELECT 1 -- c\r@other", "the macro @other"}, // a comment ends at CR, as both engines end it
		{"SELECT 1 WHERE x > $1", "positional parameter"},
		{"SELECT ?", "placeholder"},
		{"SELECT 'open", "unterminated"},
	} {
		if _, err := render(Model{Name: "m", SQL: c.sql}, "S", "E"); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("render(%q) = %v, want an error with %q", c.sql, err, c.err)
		}
	}
	// A schema-qualified model is bound under its whole name, quoted: the
	// SQL reads it as the one identifier "sushi.orders".
	got, err = render(Model{Name: "m", SQL: `SELECT * FROM "sushi.orders"`, Upstream: map[string]string{"sushi.orders": "sushi__orders__1", "sushi": "sushi__2"}}, "S", "E")
	want = "WITH \"sushi\" AS (SELECT * FROM \"tidemark\".\"sushi__2\"), \"sushi.orders\" AS (SELECT * FROM \"tidemark\".\"sushi__orders__1\")\n" +
		"SELECT * FROM (SELECT * FROM \"sushi.orders\"\n) q"
	if err != nil || got != want {
		t.Fatalf("render of a qualified upstream:\n%s (%v)\nwant:\n%s", got, err, want)
	}
	for _, n := range []string{"Sch.orders", "a.b.c", "a. b", ".a", "a.", `a".b`} {
		if _, err := render(Model{Name: "m", SQL: "SELECT 1", Upstream: map[string]string{n: "o"}}, "S", "E"); err == nil {
			t.Errorf("the upstream name %q was accepted", n)
		}
	}
}

func TestReadOnlyStatement(t *testing.T) {
	for sql, ok := range map[string]bool{
		"SELECT 1": true,
		"  with x as (select 1) select *  from x;": true,
		"(SELECT 1)":                            true,
		"SHOW TABLES":                           true,
		"select ';' as s; ":                     true,
		"-- hi\nSELECT 1":                       true,
		"EXPLAIN SELECT 1":                      true,
		"EXPLAIN ANALYZE DELETE FROM t":         false,
		"DELETE FROM t":                         false,
		"SELECT 1; DROP TABLE t":                false,
		"CREATE TABLE t AS SELECT 1":            false,
		"/* SELECT */ INSERT INTO t VALUES (1)": false,
		"":                                      false,
		"COPY t TO 'x.csv'":                     false,
		"ATTACH 'x.db'":                         false,
	} {
		if why := readOnlyStatement(sql); (why == "") != ok {
			t.Errorf("readOnlyStatement(%q) = %q, want ok=%v", sql, why, ok)
		}
	}
}

func TestRetryable(t *testing.T) {
	for msg, want := range map[string]bool{
		"TransactionContext Error: Conflict on tuple deletion!":           true,
		"TransactionContext Error: Catalog write-write conflict on alter": true,
		"Catalog Error: Table with name x does not exist":                 false,
	} {
		if got := retryableWrite(fmt.Errorf("exec: %w", errors.New(msg))); got != want {
			t.Errorf("retryableWrite(%q) = %v", msg, got)
		}
	}
	for code, want := range map[string]bool{"40001": true, "40P01": true, "23505": false, "42P01": false} {
		if got := retryableWrite(fmt.Errorf("x: %w", &pgconn.PgError{Code: code})); got != want {
			t.Errorf("retryableWrite(%s) = %v", code, got)
		}
	}
	if !retryableDDL(&pgconn.PgError{Code: "23505"}) {
		t.Error("a unique violation of concurrent CREATE IF NOT EXISTS is not retried")
	}
	n := 0
	err := retry(t.Context(), func() error { n++; return errors.New("Conflict on tuple deletion") }, retryableWrite)
	if err == nil || n != writeAttempts {
		t.Errorf("retry gave up after %d attempts: %v", n, err)
	}
}
