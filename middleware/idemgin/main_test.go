package idemgin_test

import (
	"io"
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	// gin.Default logs every request and every recovered panic.
	gin.DefaultWriter, gin.DefaultErrorWriter = io.Discard, io.Discard
	goleak.VerifyTestMain(m)
}
