package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Runs lists runs, newest first.
func (c *Client) Runs(ctx context.Context, o ListOptions) ([]api.Run, error) {
	rs := []api.Run{}
	err := c.EachRun(ctx, o, func(r *api.Run) error {
		rs = append(rs, *r)
		return nil
	})
	return rs, err
}

// EachRun lists runs, newest first, calling fn for each as it arrives: a
// listing of any length holds one run at a time. An error from fn ends the
// listing with that error.
func (c *Client) EachRun(ctx context.Context, o ListOptions, fn func(*api.Run) error) error {
	path := "/runs?" + o.query().Encode()
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("client: decode %s: want a list (%v)", path, err)
	}
	for dec.More() {
		var r api.Run
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("client: decode %s: %w", path, err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	// The server ends a listing it could not finish without the closing
	// bracket: the runs so far are not all.
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return fmt.Errorf("client: %s: %w", path, errListingCut)
	}
	return nil
}

// errListingCut says that a listing ended before its last run.
var errListingCut = errors.New("the server cut the listing short (see its log)")

// query is o as the listing's query string.
func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.All {
		q.Set("all", "1")
	}
	if o.Jobs {
		q.Set("jobs", "1")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Spec {
		q.Set("spec", "1")
	}
	if o.Lean {
		q.Set("lean", "1")
	}
	if len(o.IDs) > 0 {
		ids := make([]string, len(o.IDs))
		for i, id := range o.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		q.Set("ids", strings.Join(ids, ","))
	}
	if len(o.Users) > 0 {
		q.Set("user", strings.Join(o.Users, ","))
	}
	if len(o.Statuses) > 0 {
		st := make([]string, len(o.Statuses))
		for i, s := range o.Statuses {
			st[i] = string(s)
		}
		q.Set("status", strings.Join(st, ","))
	}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.Format(time.RFC3339Nano))
	}
	return q
}
