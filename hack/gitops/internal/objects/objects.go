// Package objects reads Kubernetes objects as kubectl prints them, for the programs of this
// module: JSON or YAML on a reader, one object, a List (kubectl get -o json), or several YAML
// documents. Objects are decoded by apimachinery's unstructured JSON scheme, as a client-go
// informer decodes them (integers as int64), so kstatus and Argo CD's Lua see what they see
// in a cluster.
package objects

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Read returns every object of in, a List's items in place of the List.
func Read(in io.Reader) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(in), 4096)
	var out []*unstructured.Unstructured
	for {
		var doc map[string]interface{}
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("cannot read the objects: %w", err)
		}
		if doc == nil {
			continue // an empty YAML document
		}
		items, isList := doc["items"].([]interface{})
		kind, _ := doc["kind"].(string)
		if !isList || !strings.HasSuffix(kind, "List") {
			items = []interface{}{doc}
		}
		for i, item := range items {
			u, err := decode(item)
			if err != nil {
				return nil, fmt.Errorf("object %d of a %s: %w", i+1, kind, err)
			}
			out = append(out, u)
		}
	}
}

func decode(item interface{}) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(item)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return u, nil
}
