package redislayer

import (
	_ "embed" // the Lua scripts below

	"github.com/redis/go-redis/v9"
)

// The scripts run with Script.Run: EVALSHA, and EVAL when the server does
// not know the script yet (after a restart or SCRIPT FLUSH). go-redis may
// send a script twice after a network error, so each one is safe to repeat
// with the same arguments.
var (
	//go:embed reserve.lua
	reserveLua string
	//go:embed complete.lua
	completeLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed fill.lua
	fillLua string
	//go:embed get.lua
	getLua string

	reserveScript  = redis.NewScript(reserveLua)
	completeScript = redis.NewScript(completeLua)
	releaseScript  = redis.NewScript(releaseLua)
	renewScript    = redis.NewScript(renewLua)
	fillScript     = redis.NewScript(fillLua)
	getScript      = redis.NewScript(getLua)
)
