// Package webui is poolagent's read-only web view: every pool with its
// utilization, held, free and waiting seats; per pool its seats (holder,
// tenant, instance, token, age, lease TTL), its queue and its instances;
// and a live feed of events.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary, with
// no external assets, so it works offline. It loads nothing but one
// server-sent event stream (/ui/events): a snapshot of every pool first,
// then each coordinator event as it happens and, after a burst of events,
// a fresh view of each pool they touched. One etcd watch serves every open
// page (not one per page, and no polling): a Hub follows the coordinator's
// event stream and reads a pool again only when an event touched it and a
// page is open.
//
// The view changes nothing. Force-release and drain stay in poolctl.
package webui
