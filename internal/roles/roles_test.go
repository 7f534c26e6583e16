package roles

import (
	"testing"
	"time"
)

func TestParseWeights(t *testing.T) {
	w, err := parseWeights("age=5, fairshare=0,max-age=1h,favor-small=true")
	if err != nil {
		t.Fatal(err)
	}
	if w.Age != 5 || w.Fairshare != 0 || w.MaxAge != time.Hour || !w.FavorSmall || w.Priority != 10000 {
		t.Errorf("weights = %+v", w)
	}
	for _, bad := range []string{"age", "speed=3", "age=-1", "max-age=soon"} {
		if _, err := parseWeights(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
