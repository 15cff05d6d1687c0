package coordinator

// FeedSynced reports whether c runs a synced feed of pool (feed.go): its
// shared state of the pool is then exact.
func FeedSynced(c *Coordinator, pool string) bool {
	return c.shared(pool).current()
}
