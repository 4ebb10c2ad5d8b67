// Package noticetest holds helpers the notice packages' tests share: the
// fake Tencent IM with a real client in front of it, and wallet_outbox
// backlogs written the way the wallet writes them. It is imported only by
// tests and benchmarks; it must not be imported by production code.
package noticetest
