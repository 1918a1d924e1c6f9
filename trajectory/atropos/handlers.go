package atropos

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"time"

	"github.com/delegatelab/delegate/internal/edge"
)

// minEnvWeight keeps an environment's weight from reaching zero
// (Atropos's MIN_ENV_WEIGHT).
const minEnvWeight = 0.01

// Handler returns the HTTP handler of every endpoint, behind the bearer
// token check and the concurrency bound.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "AtroposLib API"})
	})
	mux.HandleFunc("POST /register", s.handleRegister)
	mux.HandleFunc("POST /register-env", s.handleRegisterEnv)
	mux.HandleFunc("POST /disconnect-env", s.handleDisconnectEnv)
	mux.HandleFunc("GET /wandb_info", s.handleWandbInfo)
	mux.HandleFunc("GET /info", s.handleInfo)
	mux.HandleFunc("GET /batch", s.handleBatch)
	mux.HandleFunc("GET /latest_example", s.handleLatestExample)
	mux.HandleFunc("POST /scored_data", s.handleScoredData)
	mux.HandleFunc("POST /scored_data_list", s.handleScoredDataList)
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.HandleFunc("GET /status-env", s.handleStatusEnv)
	mux.Handle("GET /metrics", s.metrics.reg)
	mux.HandleFunc("POST /reset_data", s.handleReset)
	mux.HandleFunc("GET /reset_data", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeDetail(w, http.StatusMethodNotAllowed, "reset_data empties the queue and every registration: send it as POST, with the server's token")
	})
	gate := edge.Config{Token: s.cfg.Token, Hosts: s.cfg.Hosts, Realm: "delegate api",
		Refuse: func(w http.ResponseWriter, rf edge.Refusal) { writeDetail(w, rf.Status, rf.Message) }}
	return gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := mux.Handler(r)
		defer func() { s.metrics.observe(pattern, time.Since(start)) }()
		select {
		case s.sem <- struct{}{}:
			defer func() { <-s.sem }()
		case <-r.Context().Done():
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func writeJSON(w http.ResponseWriter, status int, v any) { edge.WriteJSON(w, status, v) }

func writeDetail(w http.ResponseWriter, status int, msg string) {
	edge.WriteJSON(w, status, map[string]string{"detail": msg})
}

// errStatus is the status writeErr answers err with; 499 when the client
// went away and nothing is written.
func errStatus(r *http.Request, err error) int {
	var fe *fieldError
	var he *httpError
	switch {
	case errors.As(err, &fe):
		return http.StatusUnprocessableEntity
	case errors.As(err, &he):
		return he.status
	case r.Context().Err() != nil:
		return 499
	}
	return http.StatusServiceUnavailable
}

// refusePush answers a push that failed with err, and counts it.
func (s *Server) refusePush(w http.ResponseWriter, r *http.Request, err error) {
	s.metrics.refuse(errStatus(r, err))
	s.writeErr(w, r, err)
}

// writeErr answers err. A schema violation gets 422 with FastAPI's detail
// list, and an httpError its own status. Anything else is a store failure
// and gets 503, since retrying may succeed.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fieldError
	var he *httpError
	switch {
	case errors.As(err, &fe):
		loc := fe.loc
		if loc == nil {
			loc = []any{"body"}
		}
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"detail": []map[string]any{{"type": "value_error", "loc": loc, "msg": fe.msg}},
		})
	case errors.As(err, &he):
		writeDetail(w, he.status, he.msg)
	default:
		if r.Context().Err() != nil { // the client went away: nothing to tell it
			s.log.Debug("request abandoned", "path", r.URL.Path, "err", err)
			return
		}
		s.log.Warn("request failed", "path", r.URL.Path, "err", err)
		writeDetail(w, http.StatusServiceUnavailable, err.Error())
	}
}

// decodeModel decodes a small JSON object like a pydantic model. Required
// fields must be present and not null, and every field of its type.
func decodeModel(body []byte, v any, required ...string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return &fieldError{loc: []any{"body"}, msg: "Input should be a valid JSON object: " + err.Error()}
	}
	for _, f := range required {
		if raw, ok := fields[f]; !ok || isNull(raw) {
			return fieldErr("Field required", "body", f)
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fieldErr(fmt.Sprintf("Input should be a valid %s, got JSON %s", te.Type, te.Value), "body", te.Field)
		}
		return &fieldError{loc: []any{"body"}, msg: err.Error()}
	}
	return nil
}

// decodeBody reads the request body into v as decodeModel does; on a
// failure it answers the request and reports false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, required ...string) bool {
	b, err := s.readBody(w, r)
	if err == nil {
		err = decodeModel(b.data, v, required...)
		b.release()
	}
	if err != nil {
		s.writeErr(w, r, err)
		return false
	}
	return true
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var reg Registration
	if !s.decodeBody(w, r, &reg, "wandb_group", "wandb_project", "batch_size", "max_token_len",
		"checkpoint_dir", "save_checkpoint_interval", "starting_step", "num_steps") {
		return
	}
	if reg.BatchSize < 1 {
		s.writeErr(w, r, fieldErr("batch_size must be at least 1", "body", "batch_size"))
		return
	}
	if reg.VocabSize < 0 {
		s.writeErr(w, r, fieldErr("vocab_size must not be negative", "body", "vocab_size"))
		return
	}
	if reg.BatchGroups < 0 || reg.BatchGroups > 0 && reg.BatchSize%reg.BatchGroups != 0 {
		s.writeErr(w, r, fieldErr(fmt.Sprintf("batch_groups %d must be 0 or divide batch_size %d", reg.BatchGroups, reg.BatchSize), "body", "batch_groups"))
		return
	}
	s.mu.Lock()
	if !s.state.Registered {
		prev := s.state
		s.state.Registered, s.state.Registration, s.state.Started = true, reg, false
		s.state.Step, s.state.Sent = reg.StartingStep, reg.StartingStep
		if err := s.saveState(r.Context()); err != nil {
			s.state = prev
			s.mu.Unlock()
			s.writeErr(w, r, err)
			return
		}
	}
	s.mu.Unlock()
	// Atropos answers uuid4().int: a 128-bit JSON integer.
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	id := new(big.Int).SetBytes(u[:])
	writeJSON(w, http.StatusOK, map[string]json.Number{"uuid": json.Number(id.String())})
}

func (s *Server) handleRegisterEnv(w http.ResponseWriter, r *http.Request) {
	var reg RegisterEnv
	if !s.decodeBody(w, r, &reg, "max_token_length", "desired_name", "weight", "group_size") {
		return
	}
	if reg.GroupSize < 1 {
		s.writeErr(w, r, fieldErr("group_size must be at least 1", "body", "group_size"))
		return
	}
	if m := reg.MinBatchAllocation; m != nil && (*m < 0 || *m > 1) {
		s.writeErr(w, r, fieldErr("min_batch_allocation must be within 0 and 1", "body", "min_batch_allocation"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.state.Started {
		writeJSON(w, http.StatusOK, map[string]string{"status": "wait for trainer to start"})
		return
	}
	same := 0
	for _, e := range s.envs {
		if e.DesiredName == reg.DesiredName {
			same++
		}
	}
	rec := envRecord{
		MaxContextLen: reg.MaxTokenLength, Weight: reg.Weight, DesiredName: reg.DesiredName,
		RealName: fmt.Sprintf("%s_%d", reg.DesiredName, same), RegisteredID: len(s.envs),
		Connected: true, MinBatchAllocation: reg.MinBatchAllocation, GroupSize: reg.GroupSize,
	}
	s.envs = append(s.envs, rec)
	if err := s.saveEnvs(r.Context()); err != nil {
		s.envs = s.envs[:len(s.envs)-1]
		s.writeErr(w, r, err)
		return
	}
	reg0 := s.state.Registration
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "success", "env_id": rec.RegisteredID, "wandb_name": rec.RealName,
		"checkpoint_dir": reg0.CheckpointDir, "starting_step": s.state.Step,
		"checkpoint_interval": reg0.SaveCheckpointInterval, "num_steps": reg0.NumSteps,
	})
}

func (s *Server) handleDisconnectEnv(w http.ResponseWriter, r *http.Request) {
	var id EnvIdentifier
	if !s.decodeBody(w, r, &id, "env_id") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id.EnvID < 0 || id.EnvID >= len(s.envs) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "failure", "error": fmt.Sprintf("unknown env_id %d (%d registered)", id.EnvID, len(s.envs))})
		return
	}
	s.envs[id.EnvID].Connected = false
	if err := s.saveEnvs(r.Context()); err != nil {
		s.envs[id.EnvID].Connected = true
		s.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "success"})
}

func (s *Server) handleWandbInfo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.state.Registered {
		writeJSON(w, http.StatusOK, map[string]any{"group": nil, "project": nil})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": s.state.Registration.WandbGroup, "project": s.state.Registration.WandbProject})
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := map[string]any{"batch_size": -1, "max_token_len": -1}
	if s.state.Registered {
		info["batch_size"] = s.state.Registration.BatchSize
		info["max_token_len"] = s.state.Registration.MaxTokenLen
	}
	// Extensions: the counters of what the server dropped.
	info["duplicates_dropped"] = s.state.Duplicates
	info["stale_dropped"] = s.state.StaleDropped
	info["max_staleness"] = s.cfg.MaxStaleness
	info["sent_step"] = s.state.Sent
	info["batch_groups"] = s.state.Registration.BatchGroups
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.state.Registered {
		writeJSON(w, http.StatusOK, Status{})
		return
	}
	writeJSON(w, http.StatusOK, Status{CurrentStep: s.state.Step, QueueSize: len(s.queue)})
}

// handleStatusEnv answers GET /status-env. With after_step=N and wait=S it
// holds the request until the trainer finishes a step after N
// (trainer_step > N), or S seconds pass.
func (s *Server) handleStatusEnv(w http.ResponseWriter, r *http.Request) {
	var id EnvIdentifier
	if !s.decodeBody(w, r, &id, "env_id") {
		return
	}
	wait, err := s.waitParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	after := math.MinInt
	if v := r.URL.Query().Get("after_step"); v != "" {
		if after, err = strconv.Atoi(v); err != nil {
			s.writeErr(w, r, &httpError{http.StatusBadRequest, fmt.Sprintf("after_step %q is not an integer", v)})
			return
		}
	}
	h := s.newHolder(r, wait)
	defer h.done()
	for {
		s.mu.Lock()
		if id.EnvID < 0 || id.EnvID >= len(s.envs) {
			n := len(s.envs)
			s.mu.Unlock()
			s.writeErr(w, r, unknownEnv(id.EnvID, n))
			return
		}
		if s.trained <= after && h.may() {
			changed := s.changed
			s.mu.Unlock()
			if !h.wait(changed) {
				return
			}
			continue
		}
		st, grew := s.statusEnv(id.EnvID)
		if grew {
			if err := s.saveEnvs(r.Context()); err != nil {
				s.log.Warn("save envs", "err", err) // the group size is recomputed on the next call
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
		return
	}
}

// slot is the sequences each group counts for when the trainer
// registered batch_groups, else 0. The caller holds s.mu.
func (s *Server) slot() int {
	reg := s.state.Registration
	if !s.state.Registered || reg.BatchGroups <= 0 {
		return 0
	}
	return reg.BatchSize / reg.BatchGroups
}

// statusEnv is Atropos's /status-env arithmetic over what the trainer has
// not fetched: assembled batches and the queue. It gives the queue as the
// asking environment sees it. Other environments' sequences beyond their
// guaranteed minimums count in packs of the largest group size. The caller
// holds s.mu; it reports whether the env's group size grew.
func (s *Server) statusEnv(id int) (StatusEnv, bool) {
	total := 0.0
	for _, e := range s.envs {
		if e.Connected {
			total += float64(e.MaxContextLen) * max(0, e.Weight)
		}
	}
	me := s.envs[id]
	weight := minEnvWeight
	if total > 0 {
		weight = max(minEnvWeight, float64(me.MaxContextLen)*me.Weight/total)
	}
	totalMin := 0.0
	minSeqs := map[int]int{}
	for _, e := range s.envs {
		if e.Connected && e.MinBatchAllocation != nil {
			totalMin += *e.MinBatchAllocation
			minSeqs[e.RegisteredID] = int(float64(s.state.Registration.BatchSize) * *e.MinBatchAllocation)
		}
	}
	groupSize := me.GroupSize
	maxGroup, selfSeqs := 1, 0
	others := map[int]int{}
	var order []int
	// An oversized group counts its nominal size and brings only its
	// group_size to the pack unit and the group size.
	slot := s.slot()
	count := func(env, size, unit int) {
		if slot > 0 {
			// Batches of groups: every group takes one slot.
			size, unit = slot, 0
		}
		packSize := size
		if unit > 0 {
			size, packSize = nominalSize(size, unit), unit
		}
		maxGroup = max(maxGroup, packSize)
		if env == id {
			groupSize = max(groupSize, packSize)
			selfSeqs += size
			return
		}
		if _, ok := others[env]; !ok {
			order = append(order, env)
		}
		others[env] += size
	}
	// The queue as the trainer will see it: batches already assembled
	// but not fetched, then the groups still queued. (Atropos's server
	// counts only the latter, so an environment pacing by it runs ahead
	// of the trainer by every batch assembled at once.)
	for _, rec := range s.pending {
		for _, g := range rec.Groups {
			// In batches of groups an empty group takes its slot too.
			if g.Size > 0 || slot > 0 {
				count(g.Env, g.Size, g.Unit)
			}
		}
	}
	for _, q := range s.queue {
		count(q.env, q.size, q.unit)
	}
	changed := groupSize != me.GroupSize
	s.envs[id].GroupSize = groupSize
	available := 0
	if maxGroup > 1 {
		for _, env := range order {
			packed := int(math.Ceil(float64(others[env])/float64(maxGroup))) * maxGroup
			available += max(0, packed-minSeqs[env])
		}
	}
	return StatusEnv{
		CurrentStep:         s.state.Step,
		TrainerStep:         s.trained,
		QueueSize:           (selfSeqs + available) / groupSize,
		UnallocatedFraction: 1 - min(totalMin, 1),
		SelfQueueSize:       selfSeqs / groupSize,
		MaxGroupSize:        maxGroup,
		EnvWeight:           weight,
	}, changed
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" {
		writeDetail(w, http.StatusForbidden, "reset_data needs the server's token: start delegate api with --token (or $DELEGATE_API_TOKEN)")
		return
	}
	s.handout.Lock()
	defer s.handout.Unlock()
	if err := s.st.reset(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if err := s.recover(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "Reset successful")
}

var emptyExample = map[string][]any{
	"tokens": {}, "masks": {}, "scores": {}, "advantages": {}, "ref_logprobs": {},
	"generation_params": {}, "inference_logprobs": {}, "messages": {}, "images": {},
}

func (s *Server) handleLatestExample(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	seq := s.latest
	s.mu.Unlock()
	if seq == 0 {
		writeJSON(w, http.StatusOK, emptyExample)
		return
	}
	body, err := s.st.body(r.Context(), seq)
	if errors.Is(err, errGone) {
		writeJSON(w, http.StatusOK, emptyExample)
		return
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (s *Server) handleScoredData(w http.ResponseWriter, r *http.Request) {
	b, err := s.readBody(w, r)
	if err != nil {
		s.refusePush(w, r, err)
		return
	}
	g, err := parseGroupBody(b.data, s.limits(), s.st.copies(), "body")
	b.release() // the group holds its own copy
	if err != nil {
		s.refusePush(w, r, err)
		return
	}
	resp, err := s.push(r.Context(), g)
	g.release()
	if err != nil {
		s.refusePush(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleScoredDataList(w http.ResponseWriter, r *http.Request) {
	b, err := s.readBody(w, r)
	if err != nil {
		s.refusePush(w, r, err)
		return
	}
	groups, err := parseGroups(b.data, s.limits(), s.st.copies())
	b.release()
	if err != nil {
		s.refusePush(w, r, err)
		return
	}
	buffered, lastSize := 0, -1
	for _, g := range groups {
		resp, err := s.push(r.Context(), g)
		g.release()
		if err != nil {
			s.refusePush(w, r, err)
			return
		}
		if resp.Status == "buffered" {
			buffered++
			lastSize = *resp.BufferSize
		}
	}
	out := map[string]any{"status": "received", "groups_processed": len(groups)}
	if buffered > 0 {
		out["buffered"] = buffered
		out["last_buffer_size"] = lastSize
	}
	writeJSON(w, http.StatusOK, out)
}

// limits are the bounds of token ids and sequences the trainer
// registered: vocab_size and max_token_len when it gave them. With
// batch_groups a group may be empty.
func (s *Server) limits() idLimits {
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := noLimits
	if !s.state.Registered {
		return lim
	}
	if v := s.state.Registration.VocabSize; v > 0 {
		lim.vocab = int64(v)
	}
	lim.maxLen = max(s.state.Registration.MaxTokenLen, 0)
	lim.empty = s.state.Registration.BatchGroups > 0
	return lim
}

// push stores one group, answering only once the store has it, and
// queues or buffers it as Atropos does.
func (s *Server) push(ctx context.Context, g *group) (ScoredResponse, error) {
	if len(g.body) > s.st.maxGroup() {
		return ScoredResponse{}, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("group of %d bytes is over the store's message limit of %d bytes", len(g.body), s.st.maxGroup())}
	}
	s.mu.Lock()
	if g.envGiven && (g.env < 0 || g.env >= len(s.envs)) {
		n := len(s.envs)
		s.mu.Unlock()
		return ScoredResponse{}, unknownEnv(g.env, n)
	}
	// A group larger than its environment's group_size could never be
	// released from a buffer: it is queued at once, as whole packs. In
	// batches of groups every group is queued at once, as one slot.
	unit, slot := 0, s.slot()
	if slot == 0 && g.env >= 0 && g.size > s.envs[g.env].GroupSize {
		unit = s.envs[g.env].GroupSize
	}
	if batch := s.state.Registration.BatchSize; unit > 0 && s.state.Registered && nominalSize(g.size, unit) > batch {
		s.mu.Unlock()
		return ScoredResponse{}, fieldErr(fmt.Sprintf("group of %d sequences counts as %d in a batch (whole packs of group_size %d), over the trainer's batch_size of %d",
			g.size, nominalSize(g.size, unit), unit, batch), "body", "tokens")
	}
	odd := slot == 0 && g.env >= 0 && unit == 0 && g.size != s.envs[g.env].GroupSize
	if _, ok := s.ids[g.id]; ok {
		s.state.Duplicates++
		resp := s.answer(g.env, odd)
		s.mu.Unlock()
		return resp, nil
	}
	s.ids[g.id] = 0
	gen := s.gen
	s.mu.Unlock()

	seq, dup, err := s.st.add(ctx, g, odd)
	if err == nil && dup {
		// The store had the group, but the server did not (a group it
		// knows is answered above): an earlier attempt of this push stored
		// it and its answer was lost (a publish that timed out while a
		// cluster node went away), and the push failed. The group is new
		// here while it is still stored; gone, it was trained on and
		// pruned, or dropped as stale, and stays a duplicate.
		if _, berr := s.st.body(ctx, seq); berr == nil {
			dup = false
		} else if !errors.Is(berr, errGone) {
			err = fmt.Errorf("look up group %s stored earlier: %w", g.id, berr)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		return ScoredResponse{}, &httpError{http.StatusConflict, "the data was reset (GET /reset_data) while this group was being stored"}
	}
	if err != nil || dup {
		if s.ids[g.id] == 0 {
			delete(s.ids, g.id)
		}
		if err != nil {
			return ScoredResponse{}, err
		}
		s.state.Duplicates++
		return s.answer(g.env, odd), nil
	}
	s.ids[g.id] = seq
	s.metrics.received.Inc()
	q := queued{seq: seq, id: g.id, env: g.env, size: g.size, policy: g.policy, hasPolicy: g.hasPolicy, unit: unit}
	if unit > 0 {
		s.metrics.oversized.Inc()
	}
	if !odd {
		s.queue = append(s.queue, q)
		s.latest = seq
		s.notify()
		return ScoredResponse{Status: "received"}, nil
	}
	s.metrics.buffered.Inc()
	if g.env < len(s.envs) {
		s.buffer[g.env] = append(s.buffer[g.env], q)
		s.release(ctx, g.env)
	}
	return s.answer(g.env, odd), nil
}

// unknownEnv is the 400 for an env_id no environment registered under.
func unknownEnv(id, registered int) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf("unknown env_id %d: %d environments registered (POST /register-env first)", id, registered)}
}

// answer is the response to a group: "buffered" with the env's buffered
// sequences for an odd-sized group. The caller holds s.mu.
func (s *Server) answer(env int, odd bool) ScoredResponse {
	if !odd {
		return ScoredResponse{Status: "received"}
	}
	n := 0
	for _, q := range s.buffer[env] {
		n += q.size
	}
	return ScoredResponse{Status: "buffered", BufferSize: &n}
}

// handleBatch answers GET /batch. A request with wait=S is held until its
// batch is ready or S seconds pass.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	wait, err := s.waitParam(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	h := s.newHolder(r, wait)
	defer h.done()
	for {
		changed := s.batch(w, r, h.may())
		if changed == nil || !h.wait(changed) {
			return
		}
	}
}

// batch answers GET /batch once. With hold set and no batch ready, it
// answers nothing and returns a channel closed when one may be.
func (s *Server) batch(w http.ResponseWriter, r *http.Request, hold bool) <-chan struct{} {
	s.handout.Lock()
	defer s.handout.Unlock()
	ctx := r.Context()
	s.mu.Lock()
	if !s.state.Registered {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"status": "error", "message": "Trainer not registered. Call /register first.", "batch": []any{}})
		return nil
	}
	if v := r.URL.Query().Get("step"); v != "" && s.batchAt(w, r, v) {
		return nil
	}
	// The trainer asks for the batch after every one handed out: it has
	// finished them.
	if s.state.Sent > s.trained {
		s.trained = s.state.Sent
		s.notify()
	}
	dirty := false
	if !s.state.Started {
		s.state.Started, dirty = true, true
	}
	if len(s.pending) == 0 {
		if s.assemble(ctx) {
			dirty = true
		}
	}
	if len(s.pending) == 0 {
		if dirty {
			if err := s.saveStateUnlocked(ctx, s.state); err != nil {
				s.mu.Unlock()
				s.writeErr(w, r, err)
				return nil
			}
		}
		if hold {
			changed := s.changed
			s.mu.Unlock()
			return changed
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"batch": nil})
		return nil
	}
	rec := s.pending[0]
	next := s.state
	next.Sent = rec.Step
	if err := s.saveStateUnlocked(ctx, next); err != nil {
		s.mu.Unlock()
		s.writeErr(w, r, err)
		return nil
	}
	s.state.Sent = rec.Step
	s.metrics.batches.Inc()
	s.pending = s.pending[1:]
	s.kept = append(s.kept, rec)
	old := rec.Step - s.cfg.KeepSteps
	start := s.state.Registration.StartingStep
	s.mu.Unlock()
	if old > start {
		// After the batch is sent (or its sending aborted); pushes go on
		// meanwhile: only s.handout is held while pruning.
		defer func() {
			if err := s.prune(context.WithoutCancel(ctx), old, false); err != nil {
				s.log.Warn("prune step", "step", old, "err", err) // retried at the next restart
			}
		}()
	}
	s.sendBatch(w, r, rec)
	return nil
}

// batchAt answers a request for the batch of step v, the query's step,
// and reports true. It answers when that batch was handed out, sending it
// again, or can never be, with an error. Called with s.mu held: it releases it
// when it answers, and keeps it when it does not (v is the next step).
func (s *Server) batchAt(w http.ResponseWriter, r *http.Request, v string) bool {
	step, err := strconv.Atoi(v)
	sent := s.state.Sent
	start := s.state.Registration.StartingStep
	switch {
	case err != nil:
		s.mu.Unlock()
		s.writeErr(w, r, &httpError{http.StatusBadRequest, fmt.Sprintf("step %q is not an integer", v)})
	case step <= start:
		s.mu.Unlock()
		s.writeErr(w, r, &httpError{http.StatusBadRequest, fmt.Sprintf("step %d: the run started at step %d, its first batch is step %d", step, start, start+1)})
	case step <= sent:
		if step-1 > s.trained { // a trainer resumed from step-1's checkpoint
			s.trained = step - 1
			s.notify()
		}
		s.mu.Unlock()
		rec, err := s.loadBatch(r.Context(), batchKey(step))
		switch {
		case errors.Is(err, errGone):
			s.writeErr(w, r, &httpError{http.StatusGone, fmt.Sprintf("step %d is no longer kept (the last %d steps are)", step, s.cfg.KeepSteps)})
		case err != nil:
			s.writeErr(w, r, err)
		default:
			s.metrics.resent.Inc()
			s.sendBatch(w, r, rec)
		}
	case step > sent+1:
		s.mu.Unlock()
		s.writeErr(w, r, &httpError{http.StatusBadRequest, fmt.Sprintf("step %d not reached: the next batch is step %d", step, sent+1)})
	default:
		return false
	}
	return true
}

// assemble drops stale groups and records every full batch the queue
// holds, each under its step. The caller holds s.handout and s.mu (which
// is let go while a batch record is written); it reports whether the
// state changed.
func (s *Server) assemble(ctx context.Context) bool {
	changed := false
	if s.cfg.MaxStaleness > 0 {
		stale := func(q queued) bool {
			return q.hasPolicy && int64(s.state.Step)-q.policy > int64(s.cfg.MaxStaleness)
		}
		drop := func(qs []queued) []queued {
			kept := qs[:0]
			for _, q := range qs {
				if !stale(q) {
					kept = append(kept, q)
					continue
				}
				if err := s.st.remove(ctx, q.seq); err != nil {
					s.log.Warn("drop stale group", "seq", q.seq, "err", err)
					kept = append(kept, q)
					continue
				}
				delete(s.ids, q.id)
				if q.released {
					if err := s.st.del(ctx, "released."+strconv.FormatUint(q.seq, 10)); err != nil {
						s.log.Warn("drop stale group", "seq", q.seq, "err", err) // a stray key, harmless
					}
				}
				s.state.StaleDropped++
				changed = true
			}
			return kept
		}
		s.queue = drop(s.queue)
		for env, b := range s.buffer {
			s.buffer[env] = drop(b)
		}
	}
	hasMin := false
	for _, e := range s.envs {
		if e.MinBatchAllocation != nil {
			hasMin = true
		}
	}
	for {
		var pick []int
		if n := s.state.Registration.BatchGroups; n > 0 {
			pick = grabGroups(s.queue, n)
		} else if hasMin {
			pick = grabWithMinimums(s.queue, s.state.Registration.BatchSize, s.envs)
		} else {
			pick = grabExact(s.queue, s.state.Registration.BatchSize)
		}
		if pick == nil {
			return changed
		}
		rec := batchRecord{Version: stateVersion, Step: s.state.Step + 1}
		taken := map[int]bool{}
		for _, i := range pick {
			q := s.queue[i]
			rec.Groups = append(rec.Groups, batchGroup{Seq: q.seq, ID: q.id, Released: q.released, Env: q.env, Size: q.size, Unit: q.unit})
			taken[i] = true
		}
		b, err := json.Marshal(rec)
		if err == nil {
			// Pushes go on while the record is written: they only append
			// to s.queue, so the indices in pick still hold.
			err = s.putUnlocked(ctx, batchKey(rec.Step), b)
		}
		if err != nil {
			s.log.Warn("record batch", "step", rec.Step, "err", err)
			return changed
		}
		kept := s.queue[:0:0]
		for i, q := range s.queue {
			if !taken[i] {
				kept = append(kept, q)
			}
		}
		s.queue = kept
		s.state.Step = rec.Step
		s.pending = append(s.pending, rec)
		changed = true
	}
}

// sendBatch writes {"batch":[...],"step":N}. It reads each group from the
// store as it goes, so a batch never sits whole in memory. A store
// failure after the first byte aborts the connection rather than send
// truncated JSON; the trainer then asks for the step again.
func (s *Server) sendBatch(w http.ResponseWriter, r *http.Request, rec batchRecord) {
	started := false
	for i, g := range rec.Groups {
		body, err := s.st.body(r.Context(), g.Seq)
		if err != nil {
			if errors.Is(err, errGone) {
				err = &httpError{http.StatusGone, fmt.Sprintf("step %d: group %d is no longer stored", rec.Step, g.Seq)}
			}
			if !started {
				s.writeErr(w, r, err)
				return
			}
			s.log.Warn("send batch", "step", rec.Step, "err", err)
			panic(http.ErrAbortHandler)
		}
		if !started {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"batch":[`)
			started = true
		}
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		if _, err := w.Write(body); err != nil {
			return // the trainer went away; it asks for the step again
		}
	}
	_, _ = io.WriteString(w, `],"step":`+strconv.Itoa(rec.Step)+"}")
}
