package loader

import (
	"fmt"
	"sort"
	"strings"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

// Views are several views of one dataset served by one daemon (or
// materialized in one folder): each a served subset (all graphs, or one
// set of a split, per fold) with its own schedule, a Loader per fold. A
// request names its view and fold (wire.Request.View, Fold); one naming no
// view gets Default. A whole k-fold cross-validation, every policy, runs on
// one daemon: the views share the shards, the per-graph caches and the
// memory budget.
type Views struct {
	// Default is the view of a request naming none ("": such a request is
	// refused when there are several views).
	Default string
	list    []*View // in the order given
	byName  map[string]*View
}

// View is one named view: a Loader per fold (one for a view without folds).
type View struct {
	Name    string
	Set     string // "all", "training" or "test"
	PerFold bool
	Folds   []*Loader
}

// ValidViewName reports whether name may name a view: at most
// wire.MaxViewName bytes of letters, digits, '_', '-' and '.', not starting
// with '.' (a materialized view is a folder of that name).
func ValidViewName(name string) bool {
	if name == "" || len(name) > wire.MaxViewName || name[0] == '.' {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// NewViews checks the views (valid unique names, at least one loader
// each); def names the default view ("" with a single view: that one).
func NewViews(views []*View, def string) (*Views, error) {
	v := &Views{Default: def, byName: map[string]*View{}}
	for _, w := range views {
		switch {
		case w.Name == "" && len(views) > 1:
			return nil, fmt.Errorf("loader: an unnamed view beside others")
		case w.Name != "" && !ValidViewName(w.Name):
			return nil, fmt.Errorf("loader: view name %q: use at most %d letters, digits, '_', '-' or '.', not starting with '.'", w.Name, wire.MaxViewName)
		case v.byName[w.Name] != nil:
			return nil, fmt.Errorf("loader: view %q defined twice", w.Name)
		case len(w.Folds) == 0:
			return nil, fmt.Errorf("loader: view %q has no loader", w.Name)
		}
		v.byName[w.Name] = w
		v.list = append(v.list, w)
	}
	if len(views) == 1 && def == "" {
		v.Default = views[0].Name
	}
	if v.Default != "" && v.byName[v.Default] == nil {
		return nil, fmt.Errorf("loader: default view %q is not defined", v.Default)
	}
	return v, nil
}

// Single is the views of a daemon with one loader: one unnamed view.
func Single(l *Loader) *Views {
	v, _ := NewViews([]*View{{Set: "all", Folds: []*Loader{l}}}, "")
	return v
}

// List returns the views in the order they were given.
func (v *Views) List() []*View { return v.list }

// Names lists the views, sorted.
func (v *Views) Names() []string {
	names := make([]string, 0, len(v.list))
	for _, w := range v.list {
		names = append(names, w.Name)
	}
	sort.Strings(names)
	return names
}

// View returns the view called name, or nil.
func (v *Views) View(name string) *View { return v.byName[name] }

// Loader returns the loader of a request's view and fold; errors wrap
// epoch.ErrRange and say what the daemon serves.
func (v *Views) Loader(req wire.Request) (*Loader, error) {
	w, err := v.pick(req.View)
	if err != nil {
		return nil, err
	}
	if req.Fold < 0 || req.Fold >= len(w.Folds) {
		if !w.PerFold {
			return nil, fmt.Errorf("%w: view %q has no folds (fold %d asked)", epoch.ErrRange, w.Name, req.Fold)
		}
		return nil, fmt.Errorf("%w: fold %d of view %q (it has %d)", epoch.ErrRange, req.Fold, w.Name, len(w.Folds))
	}
	return w.Folds[req.Fold], nil
}

func (v *Views) pick(name string) (*View, error) {
	if name == "" {
		name = v.Default
	}
	if w := v.byName[name]; w != nil {
		return w, nil
	}
	// The message is the whole story (no "epoch: out of range" before it):
	// a missing view is not an epoch out of range.
	if name == "" {
		return nil, &wire.Error{Code: wire.CodeOutOfRange, Message: fmt.Sprintf("a view is required: this daemon serves several views (%s) and none is the default; name one (view=NAME, and fold=N for a per-fold view)",
			strings.Join(v.Names(), ", "))}
	}
	if names := v.Names(); len(names) == 1 && names[0] == "" {
		return nil, &wire.Error{Code: wire.CodeOutOfRange, Message: fmt.Sprintf("no view %q: this daemon serves no named views, only its one served set (ask without a view, or start it with --view %s=...)", name, name)}
	}
	return nil, &wire.Error{Code: wire.CodeOutOfRange, Message: fmt.Sprintf("no view %q: this daemon serves %s", name, strings.Join(v.Names(), ", "))}
}

// Describe lists the views for a log line or a readiness message.
func (v *Views) Describe() []map[string]any {
	var out []map[string]any
	for _, n := range v.Names() {
		w := v.byName[n]
		l := w.Folds[0]
		d := map[string]any{"view": n, "set": w.Set, "graphs": len(l.Source().Served()),
			"schedule": l.Identity().Schedule, "augments": l.Config().Schedule.Augments()}
		if w.PerFold {
			d["folds"] = len(w.Folds)
		}
		if k := l.Twins(); k > 0 {
			d["twins"] = k
		}
		if n == v.Default {
			d["default"] = true
		}
		out = append(out, d)
	}
	return out
}
