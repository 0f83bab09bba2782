//! The SSH transport against real sshd hosts from `fleet/lab/`.

mod common;

use common::lab::Lab;

#[test]
fn lab_hosts_answer_the_system_ssh_client() {
    let Some(lab) = Lab::start(2) else { return };
    for h in lab.hosts() {
        let out = lab.ssh(&h, "hostname");
        let (o, e) = common::text(&out);
        assert!(out.status.success(), "{h}: {e}\n{}", lab.sshd_log(&h));
        assert_eq!(o.trim(), h);
    }
}
