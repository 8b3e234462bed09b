// Package heartbeat owns beating and watching: the failure detector that
// decides when a peer holding a piece of work has gone silent.
//
// It owns a Config of tuning knobs with defaults for where bedwe runs, a
// phi-accrual Detector for one subject, a Watcher that watches many
// subjects and reports each silent one once, and a Beater for the holder's
// side. It never touches the network, packs, workflows or timetables: it
// imports neither libp2p nor any other bedwe package, and time comes from
// an injected clockwork.Clock so every behaviour is tested in virtual time.
//
// # How the node uses it
//
// After a hand-off the holder runs a Beater whose send writes one frame on
// a long-lived libp2p stream to its watcher. The watcher calls
// Watcher.Watch("peerID/workflowID/step") when the successor acks, calls
// Watcher.Beat with that key for each frame read, and Watcher.Unwatch when
// the successor has handed on (or delivered). A Suspicion means: re-send the
// pack elsewhere with attempt+1, and never again to that peer for that step.
// A Beat that returns false is stale: the work was already re-routed, so the
// node fences it by attempt number. Config.Confirm is where the node may ask
// two other peers whether they still hear the suspect (SWIM's indirect
// probe) before the Watcher reports it.
//
// # Choice of detector: phi-accrual with a floor and a ceiling
//
// A fixed timeout T reports a stopped subject after at most T plus one
// check, and raises a false alarm whenever a live subject's gap between
// beats exceeds T; one T must fit the worst link of the fleet. A phi-accrual
// detector (Hayashibara et al. 2004, as implemented in Akka) instead learns
// each subject's own distribution of beat intervals over a bounded window
// (mean m, standard deviation s) and computes
//
//	phi(t) = -log10 P(a live subject stays silent for t),
//
// with the normal model centred on m + AcceptablePause, s floored at
// MinStdDev, and Akka's logistic approximation of the normal tail. The
// subject is suspected when phi reaches Threshold; since phi is increasing
// in t, that is a deadline, which the Detector computes once per beat by
// inverting phi (Threshold 8 is 5.226 standard deviations), so a check is
// one time comparison per subject.
//
// Phi-accrual is chosen because bedwe's links differ: a wired board, a
// board three Wi-Fi hops away, a peer on an older build beating at another
// interval. Each gets a deadline fitted to its own history, and a link
// that turns jittery widens its own margin instead of raising alarms. On a
// quiet link the deviation floor makes it a fixed timeout of
// Interval + AcceptablePause + 5.2 x max(MinStdDev, Interval/4), so nothing
// is lost against the simple scheme. Two guards keep the adaptation honest:
// MaxSilence caps the deadline, so the node can promise a worst-case
// re-route time whatever the history, and an interval is learned only if
// it ended before the deadline, so an outage never teaches the detector to
// be patient.
//
// # Defaults and what they give
//
// Detection times are the silence after the last beat of a subject that
// beat steadily and then stopped (Config.SuspectAfter, and
// Config.DetectionBound which adds one CheckInterval); a subject that never
// beats after Watch is treated the same.
//
//	config   Interval  Pause  MinStdDev  phi  suspect after  bound   ceiling
//	Mesh     1 s       3 s    200 ms     8    5.31 s         5.56 s  10 s
//	Testnet  250 ms    500 ms 100 ms     8    1.27 s         1.32 s  1.45 s
//	Local    100 ms    100 ms 20 ms      8    0.33 s         0.34 s  none
//
// The testnet numbers meet the requirement "a killed peer noticed within
// 1.5 s": 1.32 s for a steady history, and the 1.45 s ceiling plus a 50 ms
// check keeps it at 1.5 s for any history. A false alarm needs a live
// subject silent for 1.27 s, five beat periods in a row: a holder stalled
// for a second or more (Confirm can catch that case), or the watcher itself
// frozen (the late-timer rule below). The mesh defaults trade four more seconds of detection for a 3 s
// pause that absorbs SD-card fsyncs and Wi-Fi retries, since a needless
// re-route over radio costs more than a late one.
//
// # Lifeguard's rule: a late watcher accuses nobody
//
// A watcher that was itself frozen or starved of CPU sees every subject
// silent at once, because it did not read their beats. So the Watcher runs
// its checks on a timer and notes when each was due; when one fires later
// than LateTimerTolerance it accuses nobody on that tick, restarts every
// subject's silence from now (without learning from that interval), logs
// it with slog, and counts it in Stats.LateTicks. Stats.WorstLateness shows
// how close the machine came. This delays true detections after a freeze
// by up to one SuspectAfter; the node fences every re-route with an attempt
// number anyway.
package heartbeat
