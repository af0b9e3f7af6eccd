// Package scheduler holds stint's pure decisions: how long to back off before a retry, and
// (as the later issues land) next fire times, misfire handling, placement fit and
// concurrency policy. Functions here take `now` and randomness as arguments, do no I/O, and
// import nothing of stint's but model, so they are tested with plain tables.
package scheduler
