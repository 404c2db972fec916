// Package lockwait carries, from the Store to its SQL tier, how long a
// claim may wait for a lock that another transaction holds on its key: the
// Store's wait, which a claim's SQL timeout alone does not know.
package lockwait
