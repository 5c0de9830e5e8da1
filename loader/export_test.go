package loader

import (
	"context"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/epoch"
)

// WindowPartner draws graph target's SubMix partner as a windowed pass
// does (for the tests).
func WindowPartner(s *Source, win *epoch.Windowed, target int64, r aug.Rand, into *aug.Graph) error {
	return s.windowPartners(win).Partner(context.Background(), target, r, into)
}
