package middleware

import "net/http"

// StoredResponse is a response as the middleware keeps it in a record's
// Result, decoded for operators (the idem command's get prints it).
type StoredResponse struct {
	// Status is the stored status code (0 only for a hijacked connection).
	Status int
	// Header holds the stored fields: those of the replay allow-list.
	Header http.Header
	// Body is the stored body; it shares the bytes given to
	// DecodeStoredResponse.
	Body []byte
	// NotReplayable is set for a tombstone: the response was sent but not
	// kept, and every retry gets ProblemNotReplayable. Reason says why:
	// "streamed", "oversize" or "hijacked" (more than one, joined by
	// commas, when several hold).
	NotReplayable bool
	Reason        string
}

// DecodeStoredResponse decodes the Result of a record the middleware
// completed. It returns an error for bytes that are not a response this
// version of the middleware stores (another writer's result, damage); it
// never panics.
func DecodeStoredResponse(result []byte) (StoredResponse, error) {
	s, err := decode(result)
	if err != nil {
		return StoredResponse{}, err
	}
	out := StoredResponse{Status: s.status, Header: http.Header{}, Body: s.body, NotReplayable: s.tombstone()}
	s.eachField(func(name, value string) { out.Header[name] = append(out.Header[name], value) })
	for _, r := range []struct {
		flag byte
		name string
	}{{flagStreamed, "streamed"}, {flagOversize, "oversize"}, {flagHijacked, "hijacked"}} {
		if s.flags&r.flag != 0 {
			if out.Reason != "" {
				out.Reason += ","
			}
			out.Reason += r.name
		}
	}
	return out, nil
}
