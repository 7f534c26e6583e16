package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrMalformed is wrapped by every error about a line of an SWF trace that
// cannot be read.
var ErrMalformed = errors.New("sim: malformed SWF line")

// ParseError names the file, line and field of a trace that cannot be read.
type ParseError struct {
	File  string // "" when read from a reader
	Line  int    // 1-based
	Field int    // 1-based SWF field; 0: the line as a whole
	Msg   string
}

func (e *ParseError) Error() string {
	where := e.File
	if where == "" {
		where = "trace"
	}
	where += ":" + strconv.Itoa(e.Line)
	if e.Field > 0 {
		where += fmt.Sprintf(": field %d (%s)", e.Field, swfFieldNames[e.Field-1])
	}
	return where + ": " + e.Msg
}

func (e *ParseError) Unwrap() error { return ErrMalformed }

// swfFields is how many whitespace-separated fields each SWF job line has.
const swfFields = 18

var swfFieldNames = [swfFields]string{
	"job number", "submit time", "wait time", "run time", "allocated processors",
	"average CPU time", "used memory", "requested processors", "requested time",
	"requested memory", "status", "user id", "group id", "executable",
	"queue", "partition", "preceding job", "think time",
}

// Trace is what an SWF file holds: its machine size and all its job lines
// (none dropped yet: see Keep).
type Trace struct {
	// MaxProcs is the header's MaxProcs, else its MaxNodes; 0 when it has
	// neither.
	MaxProcs int
	Jobs     []Job
}

// OpenSWF reads an SWF trace from a file, gzipped or plain (told by its
// content, not its name).
func OpenSWF(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	tr, err := parseSWF(f, path)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return Trace{}, err // already names the file
		}
		return Trace{}, fmt.Errorf("read trace %s: %w", path, err)
	}
	return tr, nil
}

// ParseSWF reads an SWF trace, gzipped or plain.
//
// Per job line (SWF fields, 1-based): the ID is field 1, the submit time
// field 2, the run time field 4, the processors field 8 (requested) if
// positive, else field 5 (allocated); the request is field 9 if positive,
// else the run time, and the estimate is max(request, run time); the user is
// field 12. Recorded wait times (field 3) and statuses are ignored. Lines
// starting with ';' are header and comments; blank lines are skipped.
func ParseSWF(r io.Reader) (Trace, error) { return parseSWF(r, "") }

func parseSWF(r io.Reader, name string) (Trace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Trace{}, fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	var tr Trace
	var maxNodes int
	seen := map[int64]int{} // job ID -> line
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if text[0] == ';' {
			key, val, ok := strings.Cut(string(text[1:]), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(key) {
			case "MaxProcs":
				tr.MaxProcs = headerInt(val)
			case "MaxNodes":
				maxNodes = headerInt(val)
			}
			continue
		}
		j, err := parseSWFJob(text)
		if err != nil {
			err.File, err.Line = name, line
			return Trace{}, err
		}
		if prev, dup := seen[j.ID]; dup {
			return Trace{}, &ParseError{File: name, Line: line, Field: 1, Msg: fmt.Sprintf("job %d already on line %d: job numbers must be unique", j.ID, prev)}
		}
		seen[j.ID] = line
		tr.Jobs = append(tr.Jobs, j)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("line %d: %w", line+1, err)
	}
	if tr.MaxProcs <= 0 {
		tr.MaxProcs = max(maxNodes, 0)
	}
	return tr, nil
}

// headerInt reads a header value such as " 100"; -1 or garbage: 0 (unknown).
func headerInt(v string) int {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func parseSWFJob(text []byte) (Job, *ParseError) {
	fields := strings.Fields(string(text))
	if len(fields) != swfFields {
		return Job{}, &ParseError{Msg: fmt.Sprintf("%d fields, want %d (job number, submit time, ..., think time; -1 for unknown)", len(fields), swfFields)}
	}
	var v [swfFields]int64
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			// Some archives write fractional values (average CPU time,
			// memory); accept any number, keep its integer part.
			x, ferr := strconv.ParseFloat(f, 64)
			if ferr != nil || x != x || x > 1<<62 || x < -(1<<62) {
				return Job{}, &ParseError{Field: i + 1, Msg: fmt.Sprintf("%q is not a number (use -1 for unknown)", f)}
			}
			n = int64(x)
		}
		v[i] = n
	}
	const maxSeconds = int64(1<<63-1) / int64(time.Second)
	for _, i := range []int{1, 3, 8} { // submit, run, requested time
		if v[i] > maxSeconds {
			return Job{}, &ParseError{Field: i + 1, Msg: fmt.Sprintf("%d seconds is out of range", v[i])}
		}
	}
	if v[1] < 0 {
		return Job{}, &ParseError{Field: 2, Msg: fmt.Sprintf("negative submit time %d", v[1])}
	}
	run := time.Duration(v[3]) * time.Second
	procs := v[7]
	if procs <= 0 {
		procs = v[4]
	}
	if procs > 1<<31-1 {
		return Job{}, &ParseError{Field: 8, Msg: fmt.Sprintf("%d processors is out of range", procs)}
	}
	procs = max(procs, -1)
	request := run
	if v[8] > 0 {
		request = time.Duration(v[8]) * time.Second
	}
	user := ""
	if v[11] >= 0 {
		user = strconv.FormatInt(v[11], 10)
	}
	return Job{
		ID:       v[0],
		User:     user,
		Submit:   time.Duration(v[1]) * time.Second,
		Run:      run,
		Procs:    int(procs),
		Estimate: max(request, run),
	}, nil
}
