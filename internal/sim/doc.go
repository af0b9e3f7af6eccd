// Package sim is a deterministic simulation of stint's decision core and store: one seed
// drives clients, workers, a network and a server process that crashes between store
// writes, and the invariants of the design are checked after every step. See
// docs/architecture.md, "Deterministic simulation".
package sim
