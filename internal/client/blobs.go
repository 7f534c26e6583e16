package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// Blobs: the archives of a run's repo and files (internal/server/blobs.go).

// HasBlob answers whether the server holds digest (ok false: it does
// not) and the most it takes in one archive.
func (c *Client) HasBlob(ctx context.Context, digest string) (b api.Blob, ok bool, err error) {
	err = c.do(ctx, c.http, http.MethodGet, "/blobs/"+url.PathEscape(digest), nil, &b)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		b.MaxSize = 0
		return b, false, nil
	}
	return b, err == nil, err
}

// PutBlob uploads data, whose SHA-256 is digest. Its time limit is the
// stream client's (none): a large archive on a slow link takes long.
func (c *Client) PutBlob(ctx context.Context, digest string, data []byte) error {
	return c.PutBlobProgress(ctx, digest, data, nil)
}

// PutBlobProgress is PutBlob calling sent, when not nil, with the bytes
// sent so far as the body is read.
func (c *Client) PutBlobProgress(ctx context.Context, digest string, data []byte, sent func(int64)) error {
	var body io.Reader = bytes.NewReader(data)
	if sent != nil {
		body = &countingReader{r: body, fn: sent}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+api.Version+"/blobs/"+url.PathEscape(digest), body)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	req.ContentLength = int64(len(data))
	c.authorize(req)
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := c.stream.Do(req)
	if err != nil {
		return fmt.Errorf("client: PUT /blobs/%s: %w", digest, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	var b api.Blob
	return json.NewDecoder(resp.Body).Decode(&b)
}

// RunBlob copies the archive digest of run ref to w (a node fetching what
// its job carries, with the run's credential).
func (c *Client) RunBlob(ctx context.Context, ref, digest string, w io.Writer) error {
	resp, err := c.get(ctx, "/runs/"+url.PathEscape(ref)+"/blobs/"+url.PathEscape(digest))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("client: archive %s: %w", digest, err)
	}
	return nil
}

// countingReader reports how much has been read through it.
type countingReader struct {
	r  io.Reader
	n  int64
	fn func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 {
		c.fn(c.n)
	}
	return n, err
}
