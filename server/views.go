package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// Views serves several views of one dataset from one daemon: each a served
// subset (all graphs, or one set of a split, per fold) with its own
// schedule. A request names its view and fold (wire.Request.View, Fold);
// one naming no view gets Default. A whole k-fold cross-validation, every
// policy, runs on one daemon: the views share the shards, the per-graph
// caches and the memory budget.
type Views struct {
	// Default is the view of a request naming none ("": such a request is
	// refused when there are several views).
	Default string
	views   map[string]*View
}

// View is one named view: a loader per fold (one for a view without folds).
type View struct {
	Name    string
	Set     string // "all", "training" or "test"
	PerFold bool
	Folds   []*loader.Loader
}

// NewViews checks the views (unique names, at least one loader each).
func NewViews(views []*View, def string) (*Views, error) {
	v := &Views{Default: def, views: map[string]*View{}}
	for _, w := range views {
		switch {
		case w.Name == "" && len(views) > 1:
			return nil, fmt.Errorf("server: an unnamed view beside others")
		case len(w.Name) > wire.MaxViewName:
			return nil, fmt.Errorf("server: view name %q longer than %d bytes", w.Name, wire.MaxViewName)
		case v.views[w.Name] != nil:
			return nil, fmt.Errorf("server: view %q defined twice", w.Name)
		case len(w.Folds) == 0:
			return nil, fmt.Errorf("server: view %q has no loader", w.Name)
		}
		v.views[w.Name] = w
	}
	if len(views) == 1 && def == "" {
		v.Default = views[0].Name
	}
	if v.Default != "" && v.views[v.Default] == nil {
		return nil, fmt.Errorf("server: default view %q is not defined", v.Default)
	}
	return v, nil
}

// Names lists the views, sorted.
func (v *Views) Names() []string {
	names := make([]string, 0, len(v.views))
	for n := range v.views {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// View returns the view called name, or nil.
func (v *Views) View(name string) *View { return v.views[name] }

// Loader returns the loader of a request's view and fold.
func (v *Views) Loader(req wire.Request) (*loader.Loader, error) {
	name := req.View
	if name == "" {
		name = v.Default
	}
	w := v.views[name]
	if w == nil {
		if req.View == "" {
			return nil, fmt.Errorf("%w: the daemon serves several views (%s): name one", epoch.ErrRange, strings.Join(v.Names(), ", "))
		}
		return nil, fmt.Errorf("%w: no view %q (the daemon serves %s)", epoch.ErrRange, req.View, strings.Join(v.Names(), ", "))
	}
	if req.Fold < 0 || req.Fold >= len(w.Folds) {
		if !w.PerFold {
			return nil, fmt.Errorf("%w: view %q has no folds (fold %d asked)", epoch.ErrRange, name, req.Fold)
		}
		return nil, fmt.Errorf("%w: fold %d of view %q (it has %d)", epoch.ErrRange, req.Fold, name, len(w.Folds))
	}
	return w.Folds[req.Fold], nil
}

// Open implements Source.
func (v *Views) Open(req wire.Request) (Stream, error) {
	l, err := v.Loader(req)
	if err != nil {
		return nil, err
	}
	return Live{L: l}.Open(req)
}

// Describe lists the views for a log line or a readiness message.
func (v *Views) Describe() []map[string]any {
	var out []map[string]any
	for _, n := range v.Names() {
		w := v.views[n]
		l := w.Folds[0]
		d := map[string]any{"view": n, "set": w.Set, "graphs": len(l.Source().Served()),
			"schedule": l.Identity().Schedule, "augments": l.Config().Schedule.Augments()}
		if w.PerFold {
			d["folds"] = len(w.Folds)
		}
		if n == v.Default {
			d["default"] = true
		}
		out = append(out, d)
	}
	return out
}
