// Package config is poolagent's configuration: one YAML schema shared by
// `poolagent serve` (the agent that registers instances) and `poolagent
// sidecar` (the claimant that runs next to an application).
//
// A Config is built in layers, later layers winning: Default(), then the
// YAML file (decoded strictly: an unknown or duplicated field is an error),
// then ETCDPOOL_* environment variables, then command-line flags that were
// set explicitly. Validate then checks every field and the cross-field rules
// (TTL against the request timeout, certificate against key, and so on). Every
// error names the field it is about, as a dotted path such as
// "agent.instances[1].address", and wraps ErrInvalid.
//
// The full schema with its defaults:
//
//	etcd:
//	  endpoints: [127.0.0.1:2379]          # ETCDPOOL_ENDPOINTS, --endpoints; host:port, http:// or https://
//	  dialTimeout: 2s                      # also bounds each request; must not exceed any TTL
//	  username: ""                         # ETCDPOOL_USER, --user (user or user:password)
//	  password: ""                         # ETCDPOOL_PASSWORD only: no flag, so never on argv
//	  passwordFile: ""                     # ETCDPOOL_PASSWORD_FILE, --password-file
//	  tls:
//	    certFile: ""                       # client certificate, with keyFile
//	    keyFile: ""
//	    caFile: ""                         # CA bundle; https endpoints use the system pool without it
//	    serverName: ""                     # --server-name: the name checked in the server's certificate
//	prefix: /etcdpool                      # root of etcdpool's keys
//	log:
//	  level: info                          # debug | info | warn | error
//	  format: text                         # text | json
//	agent:                                 # poolagent serve
//	  name: ""                             # recorded on instances; default: host name
//	  listen: ":9464"                      # /metrics, /healthz, /readyz
//	  ttl: 10s                             # lease of the instances; 2s..24h
//	  drainTimeout: 30s                    # on SIGTERM, longest wait for holders to release
//	  pools:                               # created when missing, never updated
//	    - name: gpu
//	      capacity: 8
//	      seatTTL: 10s                     # 0: coordinator default
//	      tenantLimit: 0                   # 0: no limit
//	      requireInstance: false
//	  instances:
//	    - pool: gpu
//	      id: gpu-0
//	      address: 10.0.0.5:9000           # host:port claimants connect to
//	      labels: {zone: a}
//	      seats: 1                         # claims served at once; default 1
//	sidecar:                               # poolagent sidecar
//	  pool: ""                             # required
//	  tenant: ""
//	  instance: ""                         # bind to this instance only
//	  labels: {}                           # bind to an instance carrying these labels
//	  holder: ""                           # default: $POD_NAMESPACE/$POD_NAME, else host/pid
//	  waitTimeout: 0s                      # 0: wait for a seat until stopped
//	  ttl: 10s                             # the claimant's lease; 2s..24h
//	  listen: ":8086"                      # /startupz, /readyz, /healthz, /seat, /metrics
//	  seatFile: /var/run/etcdpool/seat.json
//	  envFile: ""                          # default: seatFile with the extension .env
//	  lossGrace: 2s                        # after a loss, time to serve the failure before exiting
//	  appStopWithin: 0s                    # the app's stop time after /readyz fails; 0..ttl/2
package config
