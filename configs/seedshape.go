package configs

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Seed 003 writes the notice service's settings as top-level keys
// (wallet_database, room_database, wallet_notice_worker,
// room_notice_worker, rocketmq); roomcell nests them because one process
// runs several roles. Both shapes load and mean the same. A setting given
// in both shapes is an error naming both keys: silently preferring one
// would make the other a dead line in the file.
//
// seedAliases maps each top-level seed key onto its nested home. rename
// maps a seed leaf name to roomcell's where they differ.
var seedAliases = []struct {
	seed, nested string
	rename       map[string]string
}{
	{seed: "wallet_database", nested: "mysql.wallet_database"},
	{seed: "room_database", nested: "mysql.room_database"},
	{seed: "wallet_notice_worker", nested: "notice.wallet_notice_worker"},
	{seed: "room_notice_worker", nested: "notice.room_notice_worker"},
	// The rocketmq block is notice.mq with kind rocketmq; its name servers
	// are the MQ's servers.
	{seed: "rocketmq", nested: "notice.mq", rename: map[string]string{"name_servers": "servers"}},
}

// RocketMQConfig is seed 003's rocketmq block, key for key.
type RocketMQConfig struct {
	Enabled     bool             `yaml:"enabled"`
	NameServers []string         `yaml:"name_servers"`
	AccessKey   string           `yaml:"access_key"`
	SecretKey   string           `yaml:"secret_key"`
	RoomOutbox  MQRoomOutboxConf `yaml:"room_outbox"`
}

// seedShape is the part of a file written in seed 003's top-level shape.
// Its typed fields make the one strict decoding pass check the seed
// blocks' keys; the values are moved leaf by leaf from the document (see
// applySeedShape), so a block may mix with the nested shape's other leaves.
type seedShape struct {
	WalletDatabase     *string             `yaml:"wallet_database"`
	RoomDatabase       *string             `yaml:"room_database"`
	WalletNoticeWorker *NoticeWorkerConfig `yaml:"wallet_notice_worker"`
	RoomNoticeWorker   *NoticeWorkerConfig `yaml:"room_notice_worker"`
	RocketMQ           *RocketMQConfig     `yaml:"rocketmq"`
}

// file is what one YAML file may hold: the nested shape and seed 003's
// top-level keys, decoded in one strict pass so errors keep their lines.
type file struct {
	Config    `yaml:",inline"`
	seedShape `yaml:",inline"`
}

// checkSeedShape refuses a file that sets a leaf in seed 003's top-level
// shape and again in the nested shape.
func checkSeedShape(doc *yaml.Node) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	for _, a := range seedAliases {
		sv, nv := lookup(root, a.seed), lookup(root, a.nested)
		if sv == nil || nv == nil {
			continue
		}
		nested := leaves(nv, "")
		for _, leaf := range leaves(sv, "") {
			if slices.Contains(nested, renamed(leaf, a.rename)) {
				return errorf(join(a.seed, leaf), "set twice: also as %s (seed 003's top-level shape and roomcell's nested shape; keep one)", join(a.nested, renamed(leaf, a.rename)))
			}
		}
		if a.seed == "rocketmq" && slices.Contains(nested, "kind") {
			return errorf("rocketmq", "set together with %s.kind: the rocketmq block means kind rocketmq; keep one", a.nested)
		}
	}
	return nil
}

// applySeedShape moves the seed-shaped keys of doc onto c, before
// defaults. Only the leaves the file sets are written, so a seed block and
// the nested block it aliases may each set different leaves.
func applySeedShape(doc *yaml.Node, c *Config) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	targets := map[string]any{
		"wallet_database":      &c.MySQL.WalletDatabase,
		"room_database":        &c.MySQL.RoomDatabase,
		"wallet_notice_worker": &c.Notice.WalletNoticeWorker,
		"room_notice_worker":   &c.Notice.RoomNoticeWorker,
	}
	for key, target := range targets {
		if n := lookup(root, key); n != nil {
			if err := decodeStrict(n, target); err != nil {
				return prefixed(key, err)
			}
		}
	}
	n := lookup(root, "rocketmq")
	if n == nil {
		return nil
	}
	mq := &c.Notice.MQ
	mq.Kind = MQKindRocketMQ
	// The seed's block, with its one renamed key, onto notice.mq.
	r := struct {
		Enabled     *bool             `yaml:"enabled"`
		NameServers *[]string         `yaml:"name_servers"`
		AccessKey   *string           `yaml:"access_key"`
		SecretKey   *string           `yaml:"secret_key"`
		RoomOutbox  *MQRoomOutboxConf `yaml:"room_outbox"`
	}{Enabled: &mq.Enabled, NameServers: &mq.Servers, AccessKey: &mq.AccessKey, SecretKey: &mq.SecretKey, RoomOutbox: &mq.RoomOutbox}
	return prefixed("rocketmq", decodeStrict(n, &r))
}

// decodeStrict decodes one node with unknown keys refused, like the file
// as a whole.
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func prefixed(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (in %s)", err, key)
}

// lookup follows a dotted path through mappings.
func lookup(n *yaml.Node, path string) *yaml.Node {
	for _, part := range strings.Split(path, ".") {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// leaves lists the dotted paths of the non-mapping values under n ("" for
// n itself when it is a scalar or a sequence).
func leaves(n *yaml.Node, prefix string) []string {
	if n.Kind != yaml.MappingNode {
		return []string{prefix}
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, leaves(n.Content[i+1], join(prefix, n.Content[i].Value))...)
	}
	return out
}

func renamed(leaf string, rename map[string]string) string {
	head, tail, _ := strings.Cut(leaf, ".")
	if r, ok := rename[head]; ok {
		head = r
	}
	return join(head, tail)
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}
