export function App() {
  return <p>Portal</p>;
}
