package api

import "time"

// Identity: users, their tokens, nodes' tokens and the assertions of a
// node's local socket.

// HeaderUser and HeaderUID carry the Unix user an agent's local socket
// vouches for (SO_PEERCRED): the login name and the UID. The server takes
// them only from a node credential allowed to assert users, and ignores
// them from anyone else's.
const (
	HeaderUser = "X-Berth-User"
	HeaderUID  = "X-Berth-Uid"
)

// JobTokenPrefix starts every job credential: a run's own, given to its
// jobs as BERTH_JOB_TOKEN, valid for that run's steps and reads while it is
// active.
const JobTokenPrefix = "bjob_"

// User is a Berth user.
type User struct {
	Name      string    `json:"name"`
	Admin     bool      `json:"admin,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// UserRequest creates a user (POST /users, admin).
type UserRequest struct {
	Name  string `json:"name"`
	Admin bool   `json:"admin,omitempty"`
}

// TokenRequest makes a token (POST /tokens): for User (empty: the caller;
// another's takes an admin), named Name, expiring after ExpiresIn seconds
// (0: never).
type TokenRequest struct {
	User      string `json:"user,omitempty"`
	Name      string `json:"name,omitempty"`
	ExpiresIn int64  `json:"expires_in,omitempty"`
}

// NodeTokenRequest makes a node's credential (POST /nodes/{name}/tokens,
// admin). AssertUsers lets the node's agent vouch for its host's Unix
// users on its local socket.
type NodeTokenRequest struct {
	Name        string `json:"name,omitempty"`
	AssertUsers bool   `json:"assert_users,omitempty"`
	ExpiresIn   int64  `json:"expires_in,omitempty"`
}

// Token describes a token; Secret is set only in the answer that made it,
// the one time it is shown.
type Token struct {
	ID          string     `json:"id"`
	Name        string     `json:"name,omitempty"`
	User        string     `json:"user,omitempty"`
	Node        string     `json:"node,omitempty"`
	AssertUsers bool       `json:"assert_users,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Secret      string     `json:"token,omitempty"`
}

// WhoAmI is what the server makes of the caller's credential (GET /whoami).
type WhoAmI struct {
	// Kind is user, node or job.
	Kind  string `json:"kind"`
	User  string `json:"user,omitempty"`
	Admin bool   `json:"admin,omitempty"`
	Node  string `json:"node,omitempty"`
	Run   int64  `json:"run,omitempty"`
	// Via is the node whose socket vouched for the user (empty: a token).
	Via string `json:"via,omitempty"`
}

// DefaultSocket is where an agent listens for its host's clients, and
// where a client with no token and no configuration looks (BERTH_SOCKET
// overrides both).
const DefaultSocket = "/run/berth/berth.sock"

// Secret is a project's secret as listed: its name and who set it,
// never its value (SecretValue, for GET /secrets/{name}).
type Secret struct {
	Name      string    `json:"name"`
	Project   string    `json:"project"`
	SetBy     string    `json:"set_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretValue is the body of PUT /secrets/{name} and the answer of
// GET /secrets/{name}.
type SecretValue struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value"`
}
