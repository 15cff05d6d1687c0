package roles

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Apply creates role name (if missing) through etcd's auth API and grants
// it perms. Granting again is harmless. It needs the root role.
func Apply(ctx context.Context, cli *clientv3.Client, name string, perms []etcdclient.Access) error {
	if _, err := cli.RoleAdd(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("role add %s: %w", name, err)
	}
	for _, p := range perms {
		typ := clientv3.PermissionType(authpb.READ)
		if p.Write {
			typ = clientv3.PermissionType(authpb.READWRITE)
		}
		end := ""
		if p.Prefix {
			end = clientv3.GetPrefixRangeEnd(p.Key)
		}
		if _, err := cli.RoleGrantPermission(ctx, name, p.Key, end, typ); err != nil {
			return fmt.Errorf("role grant-permission %s %s: %w", name, p.Key, err)
		}
	}
	return nil
}
