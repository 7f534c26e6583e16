package server

import (
	"regexp"
	"strings"
)

// The API's error messages are for users: the sentinels' package words
// ("server: invalid request", "store: not found") and the prefixes of Go
// packages ("store: ", "sql: ") are the code's vocabulary, not theirs.
// publicMessage rewrites a message at the boundary, so that no error
// path, present or future, leaks them: "run \"x\": store: not found"
// becomes "run \"x\" not found".
var (
	// publicNotFound is a wrapped not-found sentinel at the end of a message.
	publicNotFound = regexp.MustCompile(`: (?:server|store): not found$`)
	// publicSentinels are the sentinels' words, where they stand before the
	// message's substance.
	publicSentinels = regexp.MustCompile(`(^|: )(?:server: (?:invalid request|conflict|forbidden|unavailable|unauthorized|not found|no policy file)|spec: invalid configuration|store: already exists|store: not found)(?:: |$)`)
	// publicPrefixes are package names opening a message or a wrapped cause.
	publicPrefixes = regexp.MustCompile(`(^|: )(?:server|store|control|sched|spec|sql|secrets|lifecycle|policy|agent|client): `)
)

func publicMessage(msg string) string {
	if word, ok := strings.CutPrefix(msg, "server: "); ok && !strings.Contains(word, ":") {
		return word // a bare sentinel: "not found", "unauthorized"
	}
	msg = publicNotFound.ReplaceAllString(msg, " not found")
	for {
		next := publicSentinels.ReplaceAllString(msg, "$1")
		next = publicPrefixes.ReplaceAllString(next, "$1")
		if next == msg {
			return msg
		}
		msg = next
	}
}
