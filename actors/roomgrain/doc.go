// Package roomgrain runs rooms as Proto.Actor grains: the grain
// that serialises a room's commands through the rules of package room,
// persists them with their outbox rows in one append and rebuilds from
// snapshot + events on activation (grain.go); its ordered IM publisher
// (publisher.go: a queue run on a dispatcher goroutine only while it has
// work, serial.go, dispatch.go); the room's observers (observer.go), the
// one way anything that follows a room attaches (the room directory, the
// room's feed of events for ListRoomEvents and WatchRoom, departures,
// likes, handed the room's LikeRoom commands and committing a window's
// row through Room.CommitReply, seat deadlines, whose expiry is the
// room's own command through Room.Commit): a
// list made on each activation and called at its points (check, commit,
// the stored envelopes, tick, stopping, stop), handed the messages it owns and
// asked to explain a refusal, with the Tick and Commit messages an
// observer may send; a room's
// logger, its fields added only when it writes (roomlog.go); a room's
// front, where an observer takes the room's likes before its mailbox
// (front.go); a room's view, its last first page of GetRoom published
// beside it until anything changes the state it was built from (view.go);
// and the client that reaches a grain wherever the cluster placed it
// (client.go), sending a local room's likes to its front and answering a
// local room's first-page reads from its view.
//
// It must not know store, IM or wallet implementations, nor any observer
// (the directory is actors/directory, the feed actors/roomfeed,
// departures actors/departures, likes actors/roomlikes, seat deadlines
// actors/seatdeadline, all wired by cmd/roomcell; graintest hosts grains
// for their tests, and roomcheck is what those tests and the grain's
// share): those come
// in through the small interfaces in grain.go and observer.go. The grain
// kind is built by its user (cmd/roomcell) from Kind and GrainProps.
package roomgrain
