package invariants

import (
	"flag"
	"os"
	"testing"
)

// defaultChecks is how many histories a plain `go test ./invariants`
// plays (about 20 s on 2 cores; 300 under -race, race_test.go); -short
// plays rapid's 100. -rapid.checks or RAPID_CHECKS choose another number.
var defaultChecks = "1000"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env && !testing.Short() {
		_ = flag.Set("rapid.checks", defaultChecks)
	}
	os.Exit(m.Run())
}
