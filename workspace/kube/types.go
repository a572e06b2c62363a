package kube

import "time"

// The core/v1 objects cove makes and reads, with the fields it sets or
// reads, as the API's JSON has them.

type objectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
}

type podObject struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   objectMeta `json:"metadata"`
	Spec       podSpec    `json:"spec"`
	Status     podStatus  `json:"status,omitzero"`
}

type podSpec struct {
	Hostname                      string              `json:"hostname,omitempty"`
	AutomountServiceAccountToken  *bool               `json:"automountServiceAccountToken,omitempty"`
	EnableServiceLinks            *bool               `json:"enableServiceLinks,omitempty"`
	HostNetwork                   bool                `json:"hostNetwork,omitempty"`
	HostPID                       bool                `json:"hostPID,omitempty"`
	HostIPC                       bool                `json:"hostIPC,omitempty"`
	RestartPolicy                 string              `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64              `json:"terminationGracePeriodSeconds,omitempty"`
	SecurityContext               *podSecurityContext `json:"securityContext,omitempty"`
	Containers                    []containerSpec     `json:"containers"`
	Volumes                       []volume            `json:"volumes,omitempty"`
	HostAliases                   []hostAlias         `json:"hostAliases,omitempty"`
}

type podSecurityContext struct {
	SeccompProfile *seccompProfile `json:"seccompProfile,omitempty"`
}

type seccompProfile struct {
	Type string `json:"type"`
}

type containerSpec struct {
	Name            string           `json:"name"`
	Image           string           `json:"image,omitempty"`
	Command         []string         `json:"command,omitempty"`
	WorkingDir      string           `json:"workingDir,omitempty"`
	Env             []envVar         `json:"env,omitempty"`
	Resources       *resources       `json:"resources,omitempty"`
	VolumeMounts    []volumeMount    `json:"volumeMounts,omitempty"`
	ImagePullPolicy string           `json:"imagePullPolicy,omitempty"`
	SecurityContext *securityContext `json:"securityContext,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// resources are quantities by resource name: "memory", "cpu", "storage".
type resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type securityContext struct {
	Privileged     *bool           `json:"privileged,omitempty"`
	Capabilities   *capabilities   `json:"capabilities,omitempty"`
	SeccompProfile *seccompProfile `json:"seccompProfile,omitempty"`
}

type capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

type volume struct {
	Name                  string       `json:"name"`
	PersistentVolumeClaim *claimSource `json:"persistentVolumeClaim,omitempty"`
	EmptyDir              *emptyDir    `json:"emptyDir,omitempty"`
}

type claimSource struct {
	ClaimName string `json:"claimName"`
}

type emptyDir struct {
	Medium    string `json:"medium,omitempty"`
	SizeLimit string `json:"sizeLimit,omitempty"`
}

type hostAlias struct {
	IP        string   `json:"ip"`
	Hostnames []string `json:"hostnames"`
}

type podStatus struct {
	Phase             string            `json:"phase,omitempty"`
	Message           string            `json:"message,omitempty"`
	StartTime         *time.Time        `json:"startTime,omitempty"`
	Conditions        []podCondition    `json:"conditions,omitempty"`
	ContainerStatuses []containerStatus `json:"containerStatuses,omitempty"`
}

type podCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

type containerStatus struct {
	State struct {
		Running *struct{}       `json:"running,omitempty"`
		Waiting *containerState `json:"waiting,omitempty"`
	} `json:"state"`
}

type containerState struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type claimObject struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   objectMeta `json:"metadata"`
	Spec       claimSpec  `json:"spec"`
}

type claimSpec struct {
	AccessModes []string  `json:"accessModes"`
	Resources   resources `json:"resources"`
}
