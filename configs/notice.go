package configs

import (
	"net"
	"strconv"
	"strings"
	"time"
)

// NoticeConfig is seed 003's notice-service configuration, generalised:
// the two workers, the message-queue fanout (the seed's rocketmq block) and
// the notice role's own health ports. The owner outboxes it reads are named
// by mysql.wallet_database and mysql.room_database (the seed's
// wallet_database and room_database), its own table by
// mysql.notice_database; tencent_im is shared with the room relay. Local
// default: every worker, the MQ and real IM off, so nothing is sent by
// mistake.
type NoticeConfig struct {
	WalletNoticeWorker NoticeWorkerConfig `yaml:"wallet_notice_worker"`
	RoomNoticeWorker   NoticeWorkerConfig `yaml:"room_notice_worker"`
	MQ                 MQConfig           `yaml:"mq"`
	// Health ports when the notice role runs alone (seed: 13009/13109);
	// see Config.ServingAddrs.
	GRPCAddr string `yaml:"grpc_addr"`
	HTTPAddr string `yaml:"http_addr"`
}

// NoticeWorkerConfig is one notice worker: the scan of its owner outbox
// and the delivery loop over its rows.
type NoticeWorkerConfig struct {
	// Enabled runs the worker: scan the owner outbox and deliver. The
	// room worker's delivery loop also runs when only the MQ consumer is
	// on (it retries what the consumer ingested), without the scan.
	Enabled      bool          `yaml:"enabled"`
	PollInterval time.Duration `yaml:"poll_interval"`
	// BatchSize bounds the rows read from the source and the rows claimed
	// per round.
	BatchSize int `yaml:"batch_size"`
	// LockTTL is the lease of a claimed row (and of the source's scan
	// cursor): a crashed worker's rows come back to others after it.
	LockTTL time.Duration `yaml:"lock_ttl"`
	// MaxRetryCount: a row is attempted at most 1+max_retry_count times,
	// then it is failed (a dead letter, never retried automatically).
	MaxRetryCount int `yaml:"max_retry_count"`
	// MaxBackoff caps the exponential backoff between attempts (it starts
	// at poll_interval and doubles per failure, jittered).
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// SendTimeout bounds one IM send; it must be below lock_ttl.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// SendConcurrency is how many sends of a claimed batch run at once.
	SendConcurrency int `yaml:"send_concurrency"`
}

// MQ kinds.
const (
	MQKindNATS     = "nats" // NATS JetStream (delivery/mq)
	MQKindRocketMQ = "rocketmq"
)

// MQConfig is the message-queue fanout of room_outbox (the seed's rocketmq
// block): the relay publishes room events to a topic, the notice role
// consumes them with its own durable consumer group.
type MQConfig struct {
	Enabled bool   `yaml:"enabled"`
	Kind    string `yaml:"kind"` // nats (JetStream) | rocketmq (delivery/mq/rocketmq)
	// Servers: NATS URLs (default nats://127.0.0.1:4222), or RocketMQ name
	// servers as host:port (default 127.0.0.1:9876).
	Servers []string `yaml:"servers"`
	// AccessKey and SecretKey: NATS user and password, or RocketMQ's ACL
	// access key and secret key. Both or neither. Use ${ENV}; the secret is
	// never logged nor put in an error.
	AccessKey  string           `yaml:"access_key"`
	SecretKey  string           `yaml:"secret_key"`
	RoomOutbox MQRoomOutboxConf `yaml:"room_outbox"`
	// TLS to the NATS servers: the client requires it (a server that does
	// not offer TLS is refused, never used in plaintext) and checks the
	// server against ca_file; cert_file/key_file when the server wants a
	// client certificate.
	TLS ClientTLSConfig `yaml:"tls"`
}

// MQRoomOutboxConf is the room_outbox topic and the notice consumer group.
type MQRoomOutboxConf struct {
	Enabled       bool   `yaml:"enabled"`
	Topic         string `yaml:"topic"`
	ConsumerGroup string `yaml:"consumer_group"`
	// MaxRedeliver: deliveries of one message after the first that failed
	// (the seed's consumer_max_reconsume_times); then the message is
	// dropped from the consumer and the MySQL scan is the only way left.
	MaxRedeliver int `yaml:"consumer_max_reconsume_times"`
	// IMBridge is seed 003's room IM bridge: a consumer group of the relay
	// role that sends the topic's room events to the rooms' IM groups, an
	// optional second IM path beside the relay (off by default).
	IMBridge MQIMBridgeConf `yaml:"im_bridge"`
}

// MQIMBridgeConf is the room IM bridge consumer group.
type MQIMBridgeConf struct {
	Enabled       bool   `yaml:"enabled"`
	ConsumerGroup string `yaml:"consumer_group"` // default hyapp-room-im-bridge
}

// RoomOutboxOn reports whether the room_outbox fanout is active (both
// mq.enabled and mq.room_outbox.enabled).
func (c MQConfig) RoomOutboxOn() bool { return c.Enabled && c.RoomOutbox.Enabled }

func (c *NoticeWorkerConfig) setDefaults() {
	c.PollInterval = durationOr(c.PollInterval, 500*time.Millisecond)
	c.BatchSize = intOr(c.BatchSize, 100)
	c.LockTTL = durationOr(c.LockTTL, 30*time.Second)
	c.MaxRetryCount = intOr(c.MaxRetryCount, 10)
	c.MaxBackoff = durationOr(c.MaxBackoff, 5*time.Minute)
	c.SendTimeout = durationOr(c.SendTimeout, 5*time.Second)
	c.SendConcurrency = intOr(c.SendConcurrency, 16)
}

// Validate checks the worker's section as it is, applying no default; key
// is its dotted name ("notice.wallet_notice_worker"), which the error
// names. The notice workers run it on the section they are given.
func (c NoticeWorkerConfig) Validate(key string) error {
	if err := firstError(
		mustBePositive(key+".poll_interval", c.PollInterval),
		mustBePositive(key+".batch_size", c.BatchSize),
		mustBePositive(key+".lock_ttl", c.LockTTL),
		mustBePositive(key+".max_retry_count", c.MaxRetryCount),
		mustBePositive(key+".send_timeout", c.SendTimeout),
		mustBePositive(key+".send_concurrency", c.SendConcurrency),
	); err != nil {
		return err
	}
	if c.LockTTL <= c.SendTimeout {
		return errorf(key+".lock_ttl", "%s must be longer than %s.send_timeout (%s)", c.LockTTL, key, c.SendTimeout)
	}
	if c.MaxBackoff < c.PollInterval {
		return errorf(key+".max_backoff", "%s is shorter than %s.poll_interval (%s)", c.MaxBackoff, key, c.PollInterval)
	}
	if c.BatchSize > 10_000 {
		return errorf(key+".batch_size", "%d is more than 10000", c.BatchSize)
	}
	return nil
}

func (c *NoticeConfig) setDefaults() {
	c.WalletNoticeWorker.setDefaults()
	c.RoomNoticeWorker.setDefaults()
	c.MQ.setDefaults()
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:13009"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:13109"
	}
}

func (c *MQConfig) setDefaults() {
	if c.Kind == "" {
		c.Kind = MQKindNATS
	}
	if len(c.Servers) == 0 {
		c.Servers = []string{"nats://127.0.0.1:4222"}
		if c.Kind == MQKindRocketMQ {
			c.Servers = []string{"127.0.0.1:9876"}
		}
	}
	if c.RoomOutbox.Topic == "" {
		c.RoomOutbox.Topic = "hyapp_room_outbox"
	}
	if c.RoomOutbox.ConsumerGroup == "" {
		c.RoomOutbox.ConsumerGroup = "hyapp-notice-room-outbox"
	}
	c.RoomOutbox.MaxRedeliver = intOr(c.RoomOutbox.MaxRedeliver, 16)
	if c.RoomOutbox.IMBridge.ConsumerGroup == "" {
		c.RoomOutbox.IMBridge.ConsumerGroup = "hyapp-room-im-bridge"
	}
}

func (c MQConfig) validate() error {
	if err := c.TLS.validate("notice.mq.tls"); err != nil {
		return err
	}
	switch c.Kind {
	case MQKindNATS, MQKindRocketMQ:
	default:
		return errorf("notice.mq.kind", "unknown kind %q (want nats or rocketmq)", c.Kind)
	}
	if !c.Enabled {
		return nil
	}
	for i, s := range c.Servers {
		if strings.TrimSpace(s) == "" {
			return errorf("notice.mq.servers", "entry %d is empty", i)
		}
		if c.Kind == MQKindRocketMQ {
			// host:port, or http(s)://host:port as Tencent Cloud writes
			// its name servers; anything else would fail only at the
			// first publish.
			hp := strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
			host, port, err := net.SplitHostPort(hp)
			if _, perr := strconv.Atoi(port); err != nil || perr != nil || host == "" || strings.Contains(hp, "/") {
				return errorf("notice.mq.servers", "entry %d (%q) is not a RocketMQ name server host:port or http://host:port (seed 003: rocketmq.name_servers)", i, s)
			}
		}
	}
	// An unset ${VAR} expands to nothing: half a credential would fail
	// every request at the broker instead of at start. Neither value is
	// printed.
	switch {
	case c.AccessKey != "" && c.SecretKey == "":
		return errorf("notice.mq.secret_key", "is empty while access_key is set (an unset environment variable?)")
	case c.AccessKey == "" && c.SecretKey != "":
		return errorf("notice.mq.access_key", "is empty while secret_key is set (an unset environment variable?)")
	}
	// JetStream names a stream and a durable consumer after these; both
	// forbid the subject separators and wildcards.
	if c.RoomOutbox.IMBridge.Enabled && c.RoomOutbox.IMBridge.ConsumerGroup == c.RoomOutbox.ConsumerGroup {
		// One group shares its messages among members: the bridge would
		// take the notice consumer's kicks away from it.
		return errorf("notice.mq.room_outbox.im_bridge.consumer_group", "%q is the notice consumer group; the bridge needs its own", c.RoomOutbox.ConsumerGroup)
	}
	for key, v := range map[string]string{"notice.mq.room_outbox.topic": c.RoomOutbox.Topic, "notice.mq.room_outbox.consumer_group": c.RoomOutbox.ConsumerGroup,
		"notice.mq.room_outbox.im_bridge.consumer_group": c.RoomOutbox.IMBridge.ConsumerGroup} {
		if strings.ContainsAny(v, ".*> \t/\\") {
			return errorf(key, "%q may not contain '.', '*', '>', '/', '\\' or spaces", v)
		}
	}
	return nil
}

func (c NoticeConfig) validate() error {
	if err := c.WalletNoticeWorker.Validate("notice.wallet_notice_worker"); err != nil {
		return err
	}
	if err := c.RoomNoticeWorker.Validate("notice.room_notice_worker"); err != nil {
		return err
	}
	if err := c.MQ.validate(); err != nil {
		return err
	}
	if err := checkAddr("notice.grpc_addr", c.GRPCAddr); err != nil {
		return err
	}
	return checkAddr("notice.http_addr", c.HTTPAddr)
}

// CheckStart reports what the loaded configuration asks for that this
// build cannot run, or must not run: an open door (OpenDoors) without
// allow_insecure, the fake IM on a MySQL or etcd node without
// tencent_im.allow_fake. Every MQ kind has an adapter (nats: JetStream,
// rocketmq: delivery/mq/rocketmq).
func (c Config) CheckStart() error {
	return c.checkSecurity()
}

// NoticeOnly reports whether the notice role is the only role of the
// process.
func (c Config) NoticeOnly() bool {
	return len(c.Roles) == 1 && c.Roles[0] == RoleNotice
}

// ServingAddrs are the gRPC and HTTP listen addresses of the process:
// notice.grpc_addr and notice.http_addr (seed 003: 13009/13109) when the
// notice role runs alone, grpc.addr and http.addr otherwise.
func (c Config) ServingAddrs() (grpcAddr, httpAddr string) {
	if c.NoticeOnly() {
		return c.Notice.GRPCAddr, c.Notice.HTTPAddr
	}
	return c.GRPC.Addr, c.HTTP.Addr
}
