package store

// Topic names a kind of change that the servers sharing one store tell each other about,
// so that a change made on one server wakes the loops and long polls waiting on another.
type Topic string

// The topics. Each matches one of the engine's wake-ups.
const (
	TopicWork      Topic = "work"      // runs became queued (or capacity was freed): wake workers' long polls
	TopicTimers    Topic = "timers"    // the earliest due time, lease expiry or rate-limit turn may have moved
	TopicSchedules Topic = "schedules" // a job's or a pipeline's schedule changed: wake the cron firer
	TopicChanges   Topic = "changes"   // a run changed state or got log output: wake followers
	TopicCancel    Topic = "cancel"    // running runs were asked to cancel: push to their workers' polls
	TopicLost      Topic = "lost"      // running attempts were ended as lost: push to their workers' polls
)

// Topics lists every topic, in a fixed order.
var Topics = []Topic{TopicWork, TopicTimers, TopicSchedules, TopicChanges, TopicCancel, TopicLost}

// WorkerRun names a run and the worker that holds it.
type WorkerRun struct {
	WorkerID string
	RunID    string
}

// Notification is one wake-up between servers: its topic and, for TopicCancel and
// TopicLost, the runs to push to their workers (empty after a reconnection, when the
// notifications missed meanwhile are unknown and every topic is treated as fired).
type Notification struct {
	Topic Topic
	Runs  []WorkerRun
}
