package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/configs"
)

// automanagedProvider is a fixed list of seed members that poll each
// other's health endpoint: a few VMs without a coordinator. It replaces
// the library's automanaged provider, which (read in its source at our
// pin) listens on 0.0.0.0 whatever the configured host, shares its
// mutexes between all instances of a process, drops a member after a
// single failed poll, and leaves a member the others dropped blocked for
// good. Here the health server binds cluster.host, a member is dropped
// after missedPolls failed polls in a row, a leaving member answers 503 so
// the others drop it at once, and a member that sees itself on another
// member's block list re-registers under a new id.
type automanagedProvider struct {
	cfg    configs.ClusterConfig
	nodeID string
	log    *slog.Logger
	hook   rejoinHook
	http   *http.Client

	c      *pcluster.Cluster
	srv    *http.Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	self    record
	gen     int
	leaving bool
	peers   map[string]*peerPoll // by health address

	memberState
}

// missedPolls failed polls in a row drop a member.
const missedPolls = 3

// healthDoc is the answer of GET /_health.
type healthDoc struct {
	record
	// Blocked are member ids this member will never admit again.
	Blocked []string `json:"blocked"`
}

type peerPoll struct {
	doc    *healthDoc
	misses int
}

func newAutomanagedProvider(cfg configs.ClusterConfig, nodeID string, log *slog.Logger, hook rejoinHook) *automanagedProvider {
	ctx, cancel := context.WithCancel(context.Background())
	return &automanagedProvider{cfg: cfg, nodeID: nodeID, log: log, hook: hook,
		http: &http.Client{Timeout: min(cfg.RefreshInterval, 2*time.Second)},
		ctx:  ctx, cancel: cancel, peers: map[string]*peerPoll{}}
}

func (p *automanagedProvider) StartMember(c *pcluster.Cluster) error {
	self, err := selfRecord(c, p.nodeID)
	if err != nil {
		return err
	}
	p.c = c
	p.self = self
	p.selfID.Store(self.ID)
	lis, err := net.Listen("tcp", net.JoinHostPort(p.cfg.Host, strconv.Itoa(p.cfg.AutomanagedPort)))
	if err != nil {
		return fmt.Errorf("cluster: automanaged health listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_health", p.serveHealth)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 2 * time.Second}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		if err := p.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("cluster: automanaged health server stopped", "error", err)
		}
	}()
	// The first round is synchronous, so readiness does not wait a full
	// refresh interval to see the others.
	p.pollOnce()
	p.synced.Store(true)
	go p.loop()
	return nil
}

func (p *automanagedProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("cluster: automanaged provider: client mode is not supported")
}

func (p *automanagedProvider) serveHealth(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	doc := healthDoc{record: p.self}
	leaving := p.leaving
	p.mu.Unlock()
	if leaving {
		http.Error(w, "leaving", http.StatusServiceUnavailable)
		return
	}
	doc.Blocked = blockedMembers(p.c)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

func (p *automanagedProvider) loop() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.pollOnce()
		}
	}
}

// pollOnce asks every seed for its health document, then publishes the
// members that answered recently.
func (p *automanagedProvider) pollOnce() {
	hosts := p.cfg.AutomanagedHosts
	docs := make([]*healthDoc, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			docs[i] = p.fetch(h)
		}()
	}
	wg.Wait()

	p.mu.Lock()
	selfID := p.self.ID
	blockedBy := ""
	for i, h := range hosts {
		pp := p.peers[h]
		if pp == nil {
			pp = &peerPoll{}
			p.peers[h] = pp
		}
		d := docs[i]
		if d == nil || d.Cluster != p.cfg.Name {
			pp.misses++
			continue
		}
		pp.doc, pp.misses = d, 0
		if d.ID != selfID && slices.Contains(d.Blocked, selfID) {
			blockedBy = d.NodeID
		}
	}
	leaving := p.leaving
	p.mu.Unlock()
	if blockedBy != "" && !leaving {
		p.Rejoin(selfID, "dropped by member "+blockedBy)
		return
	}
	p.publish()
}

func (p *automanagedProvider) fetch(host string) *healthDoc {
	ctx, cancel := context.WithTimeout(p.ctx, p.http.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/_health", nil)
	if err != nil {
		return nil
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var d healthDoc
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.ID == "" {
		return nil
	}
	return &d
}

// publish sends self (unless leaving) and every seed that answered one
// of the last missedPolls polls.
func (p *automanagedProvider) publish() {
	p.mu.Lock()
	byID := map[string]record{}
	if !p.leaving {
		byID[p.self.ID] = p.self
	}
	for _, pp := range p.peers {
		if pp.doc != nil && pp.misses < missedPolls && pp.doc.ID != p.self.ID && baseID(pp.doc.ID) != baseID(p.self.ID) {
			byID[pp.doc.ID] = pp.doc.record
		}
	}
	p.mu.Unlock()
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ms := make([]*pcluster.Member, 0, len(ids))
	for _, id := range ids {
		ms = append(ms, byID[id].member())
	}
	updateTopology(p.c, ms)
}

// Rejoin takes a new membership id; the others admit it on their next
// poll.
func (p *automanagedProvider) Rejoin(id, reason string) {
	p.mu.Lock()
	if p.leaving || p.ctx.Err() != nil || id != p.self.ID {
		p.mu.Unlock()
		return
	}
	old := p.self.ID
	p.gen++
	p.self.ID = generationID(baseID(old), p.gen)
	newID := p.self.ID
	p.selfID.Store(newID)
	p.mu.Unlock()
	p.log.Warn("cluster member dropped; re-registering under a new member id", "reason", reason, "old_member_id", old, "member_id", newID)
	if p.hook != nil {
		p.hook(old, newID, reason)
	}
	p.rejoins.Add(1)
	p.publish()
}

// Leave makes the health endpoint answer 503, so every other member drops
// this one on its next poll, and drops self from the local view.
func (p *automanagedProvider) Leave(context.Context) error {
	p.mu.Lock()
	p.leaving = true
	p.mu.Unlock()
	p.publish()
	return nil
}

// Kill stops answering health polls and polling: the others drop this
// member after missedPolls polls, as after a crash.
func (p *automanagedProvider) Kill() { p.stop() }

func (p *automanagedProvider) Shutdown(bool) error {
	p.mu.Lock()
	p.leaving = true
	p.mu.Unlock()
	p.stop()
	return nil
}

func (p *automanagedProvider) stop() {
	p.cancel()
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.srv.Shutdown(ctx)
		cancel()
	}
	p.wg.Wait()
}
