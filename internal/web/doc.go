// Package web is Berth's dashboard: server-rendered HTML pages (html/template,
// embedded with go:embed) over the server's own HTTP API, with htmx and
// server-sent events for live parts.
//
// It holds no cluster logic: every read and every action is a call of the
// API with the signed-in user's token (through internal/client, in-process
// over an in-memory connection), so the API's rules and a user's rights
// apply unchanged. The token is kept in an HttpOnly, SameSite=Strict cookie.
package web
