package engine

import "context"

// Decide runs the pod's pending requests on a node in state st: the
// solution of least cost, or, when nothing fits, the reasons. score is
// the share (0 to 100) of the node's free devices the solution leaves
// free. It fails only with ErrDeadline, when ctx ends first.
func (r *Request) Decide(ctx context.Context, st *State, node *Node) (sol *Solution, reasons []Reason, score int, err error) {
	p, rs := r.setup(st, node)
	if len(rs) > 0 {
		return nil, rs, 0, nil
	}
	defer p.release()
	s, err := p.solve(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	if s == nil {
		rs, err := p.explain(ctx)
		if err != nil {
			return nil, nil, 0, err
		}
		return nil, rs, 0, nil
	}
	score = 100
	before := 0
	for _, f := range p.free0 {
		if f {
			before++
		}
	}
	if before > 0 {
		score = 100 * (before - s.bestLost) / before
	}
	return p.solution(s), nil, score, nil
}
