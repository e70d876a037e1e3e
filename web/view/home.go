package view

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// What every page's frame and the home page show.

// Chrome is what every page's frame shows: which backends this server has.
type Chrome struct {
	Backends []engine.Device
}

// ListedRun is one line of the recent runs.
type ListedRun struct {
	store.Listed
	Info session.DumpInfo
}

// Scenario is a built-in scenario as the home page lists it.
type Scenario struct {
	// Name is its folder name, used in URLs; Title and Summary say what it
	// shows.
	Name, Title, Summary string
}

// Home is what the home page shows.
type Home struct {
	Recent    []ListedRun
	Scenarios []Scenario
	// Error is the one sentence about a refused upload.
	Error     string
	MaxUpload string
	Origin    string // scheme://host, for the curl example
	// GPUs is what each GPU of the server is doing (none without a GPU).
	GPUs []engine.GPUState
}
