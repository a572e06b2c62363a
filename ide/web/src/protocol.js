// Terminal frames: one byte of opcode, then the payload. The same values
// are in ide/terminal.go; ide's tests check that both agree.
export const OP = {
  input: 0x00,
  resize: 0x01,
  ack: 0x02,
  output: 0x10,
  exit: 0x11,
  hello: 0x12,
};
