package framework

// NormalizeMax rescales scores so that the highest becomes MaxNodeScore
// (all zero stays zero). For plugins whose raw score grows with
// preference.
func NormalizeMax(scores []NodeScore) {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s.Score)
	}
	if hi == 0 {
		return
	}
	for i := range scores {
		scores[i].Score = scores[i].Score * MaxNodeScore / hi
	}
}

// NormalizeReverse rescales scores so that the highest raw score becomes
// MinNodeScore and zero becomes MaxNodeScore. For plugins whose raw score
// counts something to avoid.
func NormalizeReverse(scores []NodeScore) {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s.Score)
	}
	for i := range scores {
		if hi == 0 {
			scores[i].Score = MaxNodeScore
			continue
		}
		scores[i].Score = MaxNodeScore - scores[i].Score*MaxNodeScore/hi
	}
}
