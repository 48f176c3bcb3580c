package backend

// Member is one member of a store that runs as several servers (the
// members of an etcd cluster, the servers of a Redlock quorum), as a Conn
// sees it. A Conn that
// can tell has a method
//
//	Members(ctx context.Context) ([]Member, error)
//
// returning one Member per host of its Endpoint, in order; store/ passes
// it on to /healthz. It is plain data.
type Member struct {
	// Endpoint is the host:port the store URL gives for the member.
	Endpoint string
	// ID and Name are the member's id and name as the store reports them
	// (etcd: the member id in hex, as etcdctl prints it, and --name): the
	// last ones seen, kept while it does not answer; "" before it first
	// answered (Name also when the member has none, or it is not known).
	ID, Name string
	// Answers says the member answered the last check, in time; Error
	// says why not ("" when it answered).
	Answers bool
	Error   string
	// Leader and LeaderName are the cluster's leader as this member knows
	// it (etcd: the raft leader it follows, possibly itself); Leader is ""
	// when it knows none — it is cut off from a quorum, or an election is
	// under way — or it did not answer.
	Leader, LeaderName string
	// InUse says the Conn's own requests go to this member now: it holds a
	// ready connection to it, and spreads its requests over every such
	// member.
	InUse bool
	// Streams is how many long-lived requests (watches, lease keepalives)
	// the Conn has open on the member now.
	Streams int
	// Quorum is set for the servers of a store that are independent of
	// one another (a Redlock quorum): none has a leader, and the store
	// works while Quorum of them (a majority) answer. 0 for the members
	// of one cluster.
	Quorum int
}
