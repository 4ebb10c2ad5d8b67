package configs

import "time"

// NoticeConfig is seed 003's notice-service configuration, generalised:
// the workers, the MQ fanout and the notice role's own health ports.
type NoticeConfig struct {
	WalletNoticeWorker NoticeWorkerConfig `yaml:"wallet_notice_worker"`
	RoomNoticeWorker   NoticeWorkerConfig `yaml:"room_notice_worker"`
	MQ                 MQConfig           `yaml:"mq"`
	// Health ports when the notice role runs alone (seed: 13009/13109).
	GRPCAddr string `yaml:"grpc_addr"`
	HTTPAddr string `yaml:"http_addr"`
}

// NoticeWorkerConfig is one notice worker.
type NoticeWorkerConfig struct {
	Enabled       bool          `yaml:"enabled"`
	PollInterval  time.Duration `yaml:"poll_interval"`
	BatchSize     int           `yaml:"batch_size"`
	LockTTL       time.Duration `yaml:"lock_ttl"`
	MaxRetryCount int           `yaml:"max_retry_count"`
}

// MQConfig is the message-queue fanout (seed: rocketmq block).
type MQConfig struct {
	Enabled    bool     `yaml:"enabled"`
	Kind       string   `yaml:"kind"` // nats (JetStream) | rocketmq
	Servers    []string `yaml:"servers"`
	RoomOutbox struct {
		Enabled       bool   `yaml:"enabled"`
		Topic         string `yaml:"topic"`
		ConsumerGroup string `yaml:"consumer_group"`
		MaxRedeliver  int    `yaml:"consumer_max_reconsume_times"`
	} `yaml:"room_outbox"`
}

func (c *NoticeWorkerConfig) setDefaults() {
	c.PollInterval = durationOr(c.PollInterval, 500*time.Millisecond)
	c.BatchSize = intOr(c.BatchSize, 100)
	c.LockTTL = durationOr(c.LockTTL, 30*time.Second)
	c.MaxRetryCount = intOr(c.MaxRetryCount, 10)
}

func (c *NoticeConfig) setDefaults() {
	c.WalletNoticeWorker.setDefaults()
	c.RoomNoticeWorker.setDefaults()
	if c.MQ.Kind == "" {
		c.MQ.Kind = "nats"
	}
	if len(c.MQ.Servers) == 0 {
		c.MQ.Servers = []string{"nats://127.0.0.1:4222"}
	}
	if c.MQ.RoomOutbox.Topic == "" {
		c.MQ.RoomOutbox.Topic = "hyapp_room_outbox"
	}
	if c.MQ.RoomOutbox.ConsumerGroup == "" {
		c.MQ.RoomOutbox.ConsumerGroup = "hyapp-notice-room-outbox"
	}
	c.MQ.RoomOutbox.MaxRedeliver = intOr(c.MQ.RoomOutbox.MaxRedeliver, 16)
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:13009"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:13109"
	}
}

func (c NoticeConfig) validate() error {
	switch c.MQ.Kind {
	case "nats", "rocketmq":
	default:
		return errorf("notice.mq.kind", "unknown kind %q (want nats or rocketmq)", c.MQ.Kind)
	}
	if c.MQ.Enabled && c.MQ.Kind == "rocketmq" {
		return errorf("notice.mq.kind", "rocketmq has no adapter in this build; use nats (see docs)")
	}
	return nil
}
