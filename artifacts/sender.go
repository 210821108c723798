package artifacts

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cikit/cikit"
)

// DefaultParallel is how many parts a Sender sends at once by default.
const DefaultParallel = 4

// maxAnswerLen bounds how much of a store's answer to a failed request
// an error quotes.
const maxAnswerLen = 512

// Sender is the runner's side of presigned transfers: it sends an
// archive through the requests a Broker hands out, and downloads one
// through a presigned GET, checking what arrives.
//
// The zero value is ready to use.
type Sender struct {
	// HTTP sends the requests; nil is http.DefaultClient.
	HTTP *http.Client
	// Parallel is how many parts of a multipart upload are sent at once;
	// zero or less is DefaultParallel.
	Parallel int
	// PartSize is the size of the parts Upload offers an archive larger
	// than it in (UploadRequest.PartSHA256), for stores that take
	// uploads in parts; zero is DefaultSendPartSize. At least
	// MinPartSize.
	PartSize int64
}

// DefaultSendPartSize is the size of the parts a Sender offers.
const DefaultSendPartSize = 16 << 20

// partSums sets req's part layout when body is larger than a part: the
// digest of each part, read from body.
func (s *Sender) partSums(req *UploadRequest, body io.ReaderAt) error {
	part := max(cmp.Or(s.PartSize, DefaultSendPartSize), MinPartSize)
	if req.Size <= part || len(req.PartSHA256) > 0 {
		return nil
	}
	req.PartSize = part
	h := sha256.New()
	for off := int64(0); off < req.Size; off += part {
		h.Reset()
		n := min(part, req.Size-off)
		if _, err := io.Copy(h, io.NewSectionReader(body, off, n)); err != nil {
			return fmt.Errorf("reading part %d: %w", len(req.PartSHA256)+1, err)
		}
		req.PartSHA256 = append(req.PartSHA256, hex.EncodeToString(h.Sum(nil)))
	}
	return nil
}

func (s *Sender) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return http.DefaultClient
}

// Upload sends body, req.Size bytes of digest req.SHA256, as the archive
// req describes: it reserves the upload with b, sends each part (up to
// Parallel at once) and completes the upload, which records it.
//
// A cache entry whose key is already saved is an error matching
// ErrCacheExists; an upload a store refuses (4xx) matches ErrRefused,
// but for a single request refused because its key holds a blob (409,
// 412): the upload is then completed, and the broker's verification of
// what the store holds decides. Any failure after the reservation aborts
// the upload, and the error names the part and quotes the store's
// answer.
func (s *Sender) Upload(ctx context.Context, b Broker, req UploadRequest, body io.ReaderAt) (*Artifact, error) {
	if err := s.partSums(&req, body); err != nil {
		return nil, fmt.Errorf("uploading %s: %w", req.Name, err)
	}
	up, err := b.CreateUpload(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reserving the upload of %s: %w", req.Name, err)
	}
	var etags []string
	var held error
	if !up.Stored {
		etags, err = s.sendParts(ctx, up, req.Size, body)
		if held = heldBlob(up, err); held == nil && err != nil {
			return nil, s.abort(ctx, b, up.ID, fmt.Errorf("uploading %s: %w", req.Name, err))
		}
	}
	art, err := b.CompleteUpload(ctx, CompleteRequest{UploadID: up.ID, ETags: etags})
	if err != nil {
		err = fmt.Errorf("completing the upload of %s: %w", req.Name, err)
		if held != nil {
			err = fmt.Errorf("%w (after uploading it: %w)", err, held)
		}
		return nil, s.abort(ctx, b, up.ID, err)
	}
	return art, nil
}

// heldBlob returns err when it is the store's refusal of the one request
// of up because its key holds a blob already (409, or 412 for S3's
// conditional write): a request of this upload sent before whose answer
// was lost, or the same content-addressed cache archive sent by another
// job. Completing the upload then verifies what the store holds.
func heldBlob(up *Upload, err error) error {
	if len(up.Parts) != 1 {
		return nil
	}
	if ae, ok := errors.AsType[*storeAnswerError](err); ok && (ae.status == http.StatusConflict || ae.status == http.StatusPreconditionFailed) {
		return err
	}
	return nil
}

// abort gives up an upload after err, on a context of its own: ctx may
// be why the upload failed.
func (s *Sender) abort(ctx context.Context, b Broker, id string, err error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	if aerr := b.AbortUpload(actx, id); aerr != nil {
		return errors.Join(err, fmt.Errorf("aborting the upload: %w", aerr))
	}
	return err
}

// sendParts sends the parts of an upload and returns their ETags.
func (s *Sender) sendParts(ctx context.Context, up *Upload, size int64, body io.ReaderAt) ([]string, error) {
	if len(up.Parts) == 0 {
		return nil, fmt.Errorf("the broker's upload %s has no requests to send", up.ID)
	}
	offsets := make([]int64, len(up.Parts))
	var total int64
	for i, p := range up.Parts {
		offsets[i] = total
		total += p.Size
	}
	if total != size {
		return nil, fmt.Errorf("the parts of upload %s add up to %d bytes, not the archive's %d", up.ID, total, size)
	}
	etags := make([]string, len(up.Parts))
	g, gctx := errgroup.WithContext(ctx)
	if s.Parallel > 0 {
		g.SetLimit(s.Parallel)
	} else {
		g.SetLimit(DefaultParallel)
	}
	for i, p := range up.Parts {
		g.Go(func() error {
			etag, err := s.sendPart(gctx, p, io.NewSectionReader(body, offsets[i], p.Size))
			if err != nil {
				return fmt.Errorf("part %d of %d (%d bytes from offset %d): %w", i+1, len(up.Parts), p.Size, offsets[i], err)
			}
			etags[i] = etag
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return etags, nil
}

// sendPart sends one part and returns the ETag it was answered with.
func (s *Sender) sendPart(ctx context.Context, p Request, body io.Reader) (string, error) {
	if p.Size == 0 {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, body)
	if err != nil {
		return "", fmt.Errorf("the presigned request is not valid: %w", err)
	}
	for k, v := range p.Header {
		req.Header[k] = v
	}
	req.ContentLength = p.Size
	resp, err := s.client().Do(req)
	if err != nil {
		return "", fmt.Errorf("sending it: %w", redactURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", answerError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerLen))
	return resp.Header.Get("ETag"), nil
}

// Download reads the blob of a presigned GET into w, checking that it is
// size bytes of digest sha256 (lowercase hex): otherwise the error
// matches ErrRefused, and what was written to w is to be thrown away.
func (s *Sender) Download(ctx context.Context, r Request, size int64, sha256Hex string, w io.Writer) error {
	if _, err := checksumOf(size, sha256Hex); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, nil)
	if err != nil {
		return fmt.Errorf("download: the presigned request is not valid: %w", err)
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return fmt.Errorf("download: %w", redactURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("download: %w", answerError(resp))
	}
	if resp.ContentLength >= 0 && resp.ContentLength != size {
		return fmt.Errorf("download: %w: the store sends %d bytes, expected %d", ErrRefused, resp.ContentLength, size)
	}
	if err := receive(resp.Body, size, sha256Hex, w); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// The buffers receive reads a blob into: large reads take fewer system
// calls and hand the hash long runs, and a few in flight let the network
// run ahead of it.
const (
	receiveChunk  = 1 << 20
	receiveChunks = 4
)

var receiveBuffers = sync.Pool{New: func() any {
	b := make([]byte, receiveChunk)
	return &b
}}

// receive copies body into w, checking that it is size bytes of digest
// want. The SHA-256 is the slowest stage (one stream cannot be hashed in
// parallel), so a blob of several chunks is hashed on a goroutine of its
// own while this one reads the next chunks and writes them to w: the
// transfer takes the longer of the two, not their sum.
func receive(body io.Reader, size int64, want string, w io.Writer) error {
	body = io.LimitReader(body, size+1)
	h := sha256.New()
	var n int64
	var err error
	if size < 2*receiveChunk {
		buf := receiveBuffers.Get().(*[]byte)
		n, err = io.CopyBuffer(io.MultiWriter(w, h), body, *buf)
		receiveBuffers.Put(buf)
	} else {
		n, err = copyHashing(w, h, body)
	}
	if err != nil {
		return fmt.Errorf("after %d bytes: %w", n, err)
	}
	if n != size {
		return fmt.Errorf("%w: the store sent %d bytes, expected %d", ErrRefused, n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: the blob's SHA-256 is %s, expected %s", ErrRefused, got, want)
	}
	return nil
}

// copyHashing copies body into w and h, as io.Copy to both would, with
// h written on another goroutine, in the order of body. It returns when
// h has seen every byte written to w.
func copyHashing(w io.Writer, h io.Writer, body io.Reader) (int64, error) {
	bufs := make([]*[]byte, receiveChunks)
	free := make(chan *[]byte, receiveChunks)
	for i := range bufs {
		bufs[i] = receiveBuffers.Get().(*[]byte)
		free <- bufs[i]
	}
	defer func() {
		for _, b := range bufs {
			receiveBuffers.Put(b)
		}
	}()
	type chunk struct {
		buf *[]byte
		n   int
	}
	filled := make(chan chunk, receiveChunks)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for c := range filled {
			_, _ = h.Write((*c.buf)[:c.n]) // a hash.Hash never fails
			free <- c.buf
		}
	}()
	var n int64
	var err error
	for {
		buf := <-free
		m, rerr := fill(body, *buf)
		if m > 0 {
			if _, err = w.Write((*buf)[:m]); err != nil {
				break
			}
			n += int64(m)
			filled <- chunk{buf, m}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(filled)
	<-hashed
	return n, err
}

// fill reads from r until buf is full or r ends (io.EOF) or fails. Unlike
// io.ReadFull it keeps r's own io.ErrUnexpectedEOF, a body cut short,
// apart from its end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// answerError describes a store's answer that is not a success, quoting
// the start of its body. A 4xx but 408 and 429 matches ErrRefused, a 404
// cikit.ErrNotFound too.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerLen))
	err := &storeAnswerError{status: resp.StatusCode, msg: fmt.Sprintf("the store answered %s: %q", resp.Status, b)}
	switch c := resp.StatusCode; {
	case c == http.StatusNotFound:
		return fmt.Errorf("%w (%w): %w", ErrRefused, cikit.ErrNotFound, err)
	case c/100 == 4 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// storeAnswerError is a store's answer that is not a success.
type storeAnswerError struct {
	status int
	msg    string
}

func (e *storeAnswerError) Error() string { return e.msg }

// redactURL drops the URL from a client's error: a presigned URL is a
// credential.
func redactURL(err error) error {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%s: %w", uerr.Op, uerr.Err)
	}
	return err
}
