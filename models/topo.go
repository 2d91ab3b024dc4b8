package models

import "sort"

// TopoSort orders the keys of deps so that each follows its dependencies
// (dependencies that are not keys are ignored; cycles are broken by name).
func TopoSort(deps map[string][]string) []string {
	names := make([]string, 0, len(deps))
	for m := range deps {
		names = append(names, m)
	}
	sort.Strings(names)
	seen := map[string]int{} // 1 visiting, 2 done
	var out []string
	var visit func(string)
	visit = func(m string) {
		if seen[m] != 0 {
			return
		}
		seen[m] = 1
		ds := append([]string(nil), deps[m]...)
		sort.Strings(ds)
		for _, d := range ds {
			if _, ok := deps[d]; ok {
				visit(d)
			}
		}
		seen[m] = 2
		out = append(out, m)
	}
	for _, m := range names {
		visit(m)
	}
	return out
}
