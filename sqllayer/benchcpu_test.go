//go:build linux

package sqllayer_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

// cpuMeter measures the processor time of this process and of the Postgres
// backends of the benchmark's pool: cpu-µs/op is both per operation,
// srv-µs/op the backends' share.
type cpuMeter struct {
	self    time.Duration
	servers map[int]time.Duration
	ok      bool
}

func startCPU(b *testing.B) *cpuMeter {
	m := &cpuMeter{self: selfCPU()}
	m.servers, m.ok = backendCPU()
	return m
}

func (m *cpuMeter) stop(b *testing.B) {
	self := selfCPU() - m.self
	servers, ok := backendCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	var server time.Duration
	for pid, t := range servers {
		server += t - m.servers[pid]
	}
	b.ReportMetric(float64((self+server).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(server.Microseconds())/float64(b.N), "srv-µs/op")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU returns the processor time of each backend whose
// application_name is benchApp, read from /proc (the server must run on
// this machine and its processes be readable).
func backendCPU() (map[int]time.Duration, bool) {
	dsn, err := testenv.PostgresDSN()
	if err != nil {
		return nil, false
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, false
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", benchApp)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, false
		}
		// Fields after the command, which ends with ')': utime and stime
		// are the 14th and 15th fields of the line, in clock ticks.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 13 {
			return nil, false
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(u+s) * (time.Second / 100) // USER_HZ is 100 on Linux
	}
	return out, rows.Err() == nil
}
