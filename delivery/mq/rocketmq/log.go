package rocketmq

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var logOnce sync.Once

// installLogger routes the client library's own log (process-wide in the
// library) to slog at WARN and above, keeping only its message and its
// underlying error: the library's other fields can hold whole messages
// (bodies), which roomcell never logs.
func installLogger() {
	logOnce.Do(func() { rlog.SetLogger(libLogger{}) })
}

type libLogger struct{}

func (libLogger) Debug(string, map[string]any) {}
func (libLogger) Info(string, map[string]any)  {}
func (libLogger) Warning(msg string, fields map[string]any) {
	slog.Warn("rocketmq client: "+msg, libAttrs(fields)...)
}
func (libLogger) Error(msg string, fields map[string]any) {
	slog.Error("rocketmq client: "+msg, libAttrs(fields)...)
}
func (libLogger) Fatal(msg string, fields map[string]any) {
	slog.Error("rocketmq client: "+msg, libAttrs(fields)...)
}
func (libLogger) Level(string)            {}
func (libLogger) OutputPath(string) error { return nil }

func libAttrs(fields map[string]any) []any {
	attrs := []any{"component", "mq", "kind", "rocketmq"}
	if e, ok := fields[rlog.LogKeyUnderlayError]; ok && e != nil {
		attrs = append(attrs, "error", fmt.Sprint(e))
	}
	for _, k := range []string{rlog.LogKeyConsumerGroup, rlog.LogKeyProducerGroup, rlog.LogKeyTopic, rlog.LogKeyBroker} {
		if v, ok := fields[k]; ok {
			attrs = append(attrs, k, fmt.Sprint(v))
		}
	}
	return attrs
}
